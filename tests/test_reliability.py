"""No input may corrupt a file, hang a run or abort it (issue 15): one regression test per
reproduction, through the functions and through the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import resource
import stat
import sys
import tokenize
import io

import pytest

from devlint import cli, source
from devlint.defuse import longest_chain
from devlint.engine import lint
from devlint.finding import Edit, Finding, Fix
from devlint.fix import apply, fix_source, write_atomic
from devlint.notebook import cell_lines

from conftest import devlint, flake8, parse_findings

FIXABLE = "scaler = torch.cuda.amp.GradScaler(enabled=True)\n"
FIXED = 'scaler = torch.amp.GradScaler("cuda", enabled=True)\n'
#: Line breaks to str.splitlines() but ordinary characters to Python.
ODD = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def fix(text: str, path: str = "a.py", **kw) -> tuple[str, int]:
    new, count = fix_source(text.encode(), path, ["DEV"], [], **kw)
    return new.decode(), count


# ---- one notion of a line -------------------------------------------------------------------

def test_lines_are_the_tokenizers():
    text = "a = 1\r\nb = '\u2028\f\x85'\rc = 2\n\x0cd = 3"
    assert source.split_lines(text) == ["a = 1", "b = '\u2028\f\x85'", "c = 2", "\x0cd = 3"]
    assert "".join(source.split_lines(text, keepends=True)) == text
    rows = {tok.start[0] for tok in tokenize.generate_tokens(io.StringIO(text.replace("\r\n", "\n").replace("\r", "\n")).readline)}
    assert max(rows) == len(source.split_lines(text)) + 1  # the ENDMARKER's line
    starts = source.line_starts(text)
    assert text[source.offset(starts, text, 3, 0):].startswith("c = 2")
    with pytest.raises(ValueError):
        source.offset(starts, text, 1, 6)  # past the end of "a = 1"
    with pytest.raises(ValueError):
        source.offset(starts, text, 9, 0)


@pytest.mark.parametrize("char", ODD, ids=[f"U+{ord(c):04X}" for c in ODD])
@pytest.mark.parametrize("where", ["string", "comment"])
def test_fix_after_a_character_splitlines_breaks_at(char, where):
    before = f'x = "a{char}b"\n' if where == "string" else f"# note{char}more\n"
    if char == "\f":
        before += "\f\n"  # a form feed as whitespace too
    text = "import torch\n" + before + FIXABLE + 'print("kept")\n'
    new, count = fix(text)
    assert count == 1 and new == "import torch\n" + before + FIXED + 'print("kept")\n'
    assert fix(new) == (new, 0)


@pytest.mark.parametrize("char", ["\u2028", "\x0c", "\x85"])
def test_noqa_lines_match_flake8(tmp_tree, char):
    text = f"import torch\nx = 'a{char}b'\ny = torch.ones(1).cuda()  # noqa: DEV102\nz = torch.ones(1).cuda()\n"
    root = tmp_tree({"a.py": text})
    ours = parse_findings(devlint("check", "--no-cache", str(root / "a.py")).stdout)["a.py"]
    theirs = parse_findings(flake8("--select=DEV", str(root / "a.py")).stdout)["a.py"]
    assert ours == theirs == {(4, "DEV102")}


def test_notebook_cell_is_not_split_at_u2028():
    cell = "import torch\nx = 'a\u2028b'\ny = torch.ones(1).cuda()\n"
    notebook = json.dumps({"cells": [{"cell_type": "code", "source": cell}], "nbformat": 4})
    assert len(cell_lines(notebook, 1)) == 3
    from devlint.runner import check_source
    from devlint.notebook import check

    assert [(f.cell, f.line, f.code) for f in check(notebook.encode(), "a.ipynb", check_source, ["DEV"], [])] == [(1, 3, "DEV102")]


# ---- edits ----------------------------------------------------------------------------------

def test_latin1_cookie_keeps_columns():
    text = '# -*- coding: latin-1 -*-\nimport torch\nx = "\xe9\xe8\xe0"; ' + FIXABLE
    new, count = fix_source(text.encode("latin-1"), "a.py", ["DEV"], [])
    assert count == 1 and new == ('# -*- coding: latin-1 -*-\nimport torch\nx = "\xe9\xe8\xe0"; ' + FIXED).encode("latin-1")


def test_utf8_bom_kept():
    new, count = fix_source(b"\xef\xbb\xbfimport torch\n" + FIXABLE.encode(), "a.py", ["DEV"], [])
    assert count == 1 and new == b"\xef\xbb\xbfimport torch\n" + FIXED.encode()


def test_fix_inside_fstring_takes_the_other_quote():
    text = 'import torch\nprint(f"{torch.cuda.amp.GradScaler(enabled=True)}")\nprint(f\'{torch.cuda.amp.GradScaler(enabled=True)}\')\n'
    new, count = fix(text)
    assert count == 2
    assert new == ("import torch\nprint(f\"{torch.amp.GradScaler('cuda', enabled=True)}\")\n"
                   "print(f'{torch.amp.GradScaler(\"cuda\", enabled=True)}')\n")


@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_line_endings_kept_in_a_multiline_fix(newline):
    text = "import torch\nwith torch.cuda.amp.autocast(\n    dtype=torch.float16,\n):\n    pass\n".replace("\n", newline)
    new, count = fix(text)
    assert count == 1 and new == 'import torch\nwith torch.amp.autocast(\n    "cuda", dtype=torch.float16,\n):\n    pass\n'.replace("\n", newline)


def test_an_edit_that_points_elsewhere_is_not_applied():
    text = "a = 1\nb = 2\n"
    wrong = Finding("a.py", 2, 0, "DEV1", "m", fix=Fix("x", (Edit(2, 0, 2, 1, "c", original="a"),)))
    outside = Finding("a.py", 2, 0, "DEV1", "m", fix=Fix("x", (Edit(2, 4, 2, 9, "3"),)))
    assert apply(text, [wrong, outside]) == (text, 0)


def test_a_fix_that_breaks_the_file_is_dropped_and_the_rest_kept():
    text = "a = 1\nb = 2\n"
    breaking = Finding("a.py", 1, 0, "DEV1", "m", fix=Fix("x", (Edit(1, 0, 1, 1, "("),)))
    fine = Finding("a.py", 2, 0, "DEV1", "m", fix=Fix("x", (Edit(2, 0, 2, 1, "c"),)))
    assert apply(text, [breaking, fine]) == ("a = 1\nc = 2\n", 1)


def test_a_file_that_does_not_compile_is_not_fixed():
    text = "import torch\n" + FIXABLE + "def f():\n    nonlocal q\n"  # libcst parses it, CPython does not
    assert fix(text) == (text, 0)


# ---- writing --------------------------------------------------------------------------------

def test_write_atomic_keeps_mode_and_symlink(tmp_path):
    target = tmp_path / "real.py"
    target.write_bytes(b"old")
    target.chmod(0o751)
    link = tmp_path / "link.py"
    link.symlink_to(target)
    write_atomic(link, b"new")
    assert link.is_symlink() and target.read_bytes() == b"new"
    assert stat.S_IMODE(target.stat().st_mode) == 0o751
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.py", "real.py"]  # no temporary file left


def _limit_file_size(limit: int):
    def limit_it():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return limit_it


@pytest.mark.skipif(sys.platform == "win32", reason="RLIMIT_FSIZE is POSIX")
def test_a_failed_write_leaves_the_file_whole_and_the_run_goes_on(tmp_tree):
    import subprocess

    big = "import torch\n" + "# padding\n" * 20_000 + FIXABLE
    root = tmp_tree({"a_big.py": big, "b_small.py": "import torch\n" + FIXABLE})
    result = subprocess.run(
        [sys.executable, "-m", "devlint", "check", "--fix", "--no-cache", "-j", "1", str(root)],
        capture_output=True, text=True, timeout=600, preexec_fn=_limit_file_size(150_000), cwd=root,
    )
    assert "Traceback" not in result.stderr and result.returncode == 1, result.stderr
    assert (root / "a_big.py").read_text() == big  # larger than the limit once rewritten: untouched
    assert (root / "b_small.py").read_text() == "import torch\n" + FIXED  # fixed all the same
    assert "a_big.py:1:1: DEV000 could not write the fixed file" in result.stdout
    assert sorted(p.name for p in root.iterdir()) == ["a_big.py", "b_small.py"]


def test_fix_respects_per_file_ignores(tmp_tree):
    root = tmp_tree({
        "pyproject.toml": '[tool.devlint]\nper-file-ignores = { "legacy_*.py" = ["DEV206"] }\n',
        "legacy_a.py": "import torch\n" + FIXABLE,
        "new_a.py": "import torch\n" + FIXABLE,
    })
    devlint("check", "--fix", "--no-cache", ".", cwd=root)
    assert (root / "legacy_a.py").read_text() == "import torch\n" + FIXABLE
    assert (root / "new_a.py").read_text() == "import torch\n" + FIXED


def test_the_hooks_form_feed_and_u2028_file(tmp_tree):
    text = 'import torch\n\x0c\nx = "a\u2028b"\n' + FIXABLE + 'print("kept")\n'
    root = tmp_tree({"f.py": text})
    devlint("check", "--no-cache", "--fix", str(root / "f.py"))
    new = (root / "f.py").read_text()
    compile(new, "f.py", "exec")
    assert new == text.replace(FIXABLE, FIXED)


# ---- runs that hang or abort ----------------------------------------------------------------

@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_py_is_skipped(tmp_tree):
    root = tmp_tree({"a.py": "import torch\nx = torch.ones(1).cuda()\n"})
    os.mkfifo(root / "pipe.py")
    walked = devlint("check", "--no-cache", ".", cwd=root)  # the conftest timeout would fail a hang
    assert parse_findings(walked.stdout) == {"a.py": {(2, "DEV102")}}
    named = devlint("check", "--no-cache", "pipe.py", "a.py", cwd=root)
    assert parse_findings(named.stdout) == {"pipe.py": {(1, "DEV000")}, "a.py": {(2, "DEV102")}}
    assert "a FIFO, not a regular file" in named.stdout


@pytest.mark.parametrize("entry", [
    '{"a": 1}', "[1, 2]", '"text"', "[" * 50_000, "",
    '[{"path": "a.py", "line": 1, "column": 0, "code": "DEV999", "message": "stale"}]',  # the old layout
    json.dumps({"format": 2, "key": "another", "findings": []}),
    json.dumps({"format": 2, "key": "KEY", "findings": [{"path": "a.py", "line": "1"}]}),
])
def test_a_bad_cache_entry_is_ignored_and_replaced(tmp_path, entry):
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(1).cuda()\n")
    assert devlint("check", "a.py", cwd=tmp_path).returncode == 1  # writes the entry
    entries = [p for p in (tmp_path / ".devlint_cache").glob("*/*") if not p.name.startswith(".")]
    assert len(entries) == 1
    entries[0].write_text(entry.replace("KEY", entries[0].name))
    for _ in range(2):  # the first run replaces the entry, the second reads it
        result = devlint("check", "a.py", cwd=tmp_path)
        assert result.returncode == 1 and "internal error" not in result.stderr
        assert parse_findings(result.stdout) == {"a.py": {(2, "DEV102")}}
    stored = json.loads(entries[0].read_text())
    assert stored["key"] == entries[0].name and [f["code"] for f in stored["findings"]] == ["DEV102"]


def test_an_unlistable_folder_is_one_finding_and_the_run_goes_on(tmp_tree, monkeypatch, capsys):
    root = tmp_tree({"locked/b.py": "import torch\n", "z.py": "import torch\nx = torch.ones(1).cuda()\n"})
    real = os.scandir

    def scandir(path="."):
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.chdir(root)
    assert cli.main(["check", "--no-cache", "-j", "1", "."]) == 1
    found = parse_findings(capsys.readouterr().out)
    assert found == {"locked": {(1, "DEV000")}, "z.py": {(2, "DEV102")}}


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root reads every folder")
def test_an_unreadable_folder_for_real(tmp_tree):
    root = tmp_tree({"locked/b.py": "import torch\n", "z.py": "import torch\nx = torch.ones(1).cuda()\n"})
    (root / "locked").chmod(0)
    try:
        result = devlint("check", "--no-cache", ".", "locked/b.py", cwd=root)
    finally:
        (root / "locked").chmod(0o755)
    assert "internal error" not in result.stderr and result.returncode == 1
    found = parse_findings(result.stdout)
    assert found["z.py"] == {(2, "DEV102")} and (1, "DEV000") in found["b.py"]


def test_an_unreadable_pyproject_is_a_warning_and_the_run_goes_on(tmp_tree):
    root = tmp_tree({"pkg/a.py": "import torch\nx = torch.ones(1).cuda()\n"})
    (root / "pkg" / "pyproject.toml").mkdir()  # opening it fails as it would without permission
    result = devlint("check", "--no-cache", "a.py", cwd=root / "pkg")
    assert result.returncode == 1 and "could not read" in result.stderr and "internal error" not in result.stderr
    assert parse_findings(result.stdout) == {"a.py": {(2, "DEV102")}}


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="needs a file system that takes any bytes")
@pytest.mark.parametrize("fmt", ["text", "github", "json", "sarif"])
def test_output_file_with_an_undecodable_file_name(tmp_path, fmt):
    name = b"\xff\xfe_train.py"
    with open(os.path.join(os.fsencode(tmp_path), name), "wb") as out:
        out.write(b"import torch\nx = torch.ones(1).cuda()\n")
    result = devlint("check", "--no-cache", "--format", fmt, "--output-file", "report.out", ".", cwd=tmp_path)
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    report = (tmp_path / "report.out").read_bytes()
    assert b"DEV102" in report and (b"_train.py" in report)


# ---- the huge-literal defuse ----------------------------------------------------------------

def test_only_long_chains_are_defused():
    assert longest_chain("x = [" + ", ".join(["-1.5e-3"] * 5000) + "]") <= 3
    assert longest_chain("x = {" + ", ".join(f"'k.{i}': a.b" for i in range(5000)) + "}") <= 2
    assert longest_chain("x = " + " + ".join(["a"] * 1500)) == 1499
    assert longest_chain("x = a" + "(1, 2)" * 1500) == 1500
    assert longest_chain("s = 'a+b+c\\'+d' # + + + +") == 0


def test_a_long_one_line_list_is_linted():
    text = "import torch\nx = [" + ", ".join(["-1.25"] * 20_000) + "]\ny = torch.ones(1).cuda()\n"
    assert [(f.line, f.code) for f in lint(text, "a.py")] == [(3, "DEV102")]


def test_add_noqa_goes_on_the_finding_line_after_u2028():
    from devlint import noqa

    text = 'import torch\nx = "a\u2028b"\ny = torch.ones(1).cuda()\n'.replace("\n", "\r\n")
    new, changed = noqa.add(text, [Finding("a.py", 3, 0, "DEV102", "m")])
    assert changed == 1 and new == text.replace("cuda()\r\n", "cuda()  # noqa: DEV102\r\n")


@pytest.mark.parametrize("spelling", ["({call})", "( {call} )", "(\n    {call}\n)", "(({call}))"])
def test_a_parenthesised_call_is_fixed_with_its_parentheses(spelling):
    call = "torch.cuda.amp.GradScaler(enabled=True)"
    text = "import torch\ns = " + spelling.format(call=call) + "\n"
    new, count = fix(text)
    assert count == 1 and new == text.replace(call, 'torch.amp.GradScaler("cuda", enabled=True)')


# ---- issue 24: read-only files, lone CRs kept in a fixed span -------------------------------

@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_a_read_only_file_is_not_rewritten(tmp_tree):
    root = tmp_tree({"ro.py": "import torch\n" + FIXABLE, "rw.py": "import torch\n" + FIXABLE})
    (root / "ro.py").chmod(0o444)
    with pytest.raises(PermissionError):
        write_atomic(root / "ro.py", b"x = 1\n")  # refused even for root, whom the bits do not stop
    result = devlint("check", "--fix", "--no-cache", ".", cwd=root)
    assert (root / "ro.py").read_text() == "import torch\n" + FIXABLE
    assert stat.S_IMODE((root / "ro.py").stat().st_mode) == 0o444
    assert "ro.py:1:1: DEV000 could not write the fixed file, left unchanged: the file is read-only" in result.stdout
    assert (root / "rw.py").read_text() == "import torch\n" + FIXED
    assert sorted(p.name for p in root.iterdir()) == ["ro.py", "rw.py"]


@pytest.mark.parametrize("first", ["\n", "\r\n"])
def test_a_lone_cr_after_a_backslash_in_a_fixed_span_stays(first):
    text = f"import torch{first}with torch.cuda.amp.autocast(\\\r    dtype=torch.float16):\n    y = 1\n"
    new, count = fix(text)
    assert count == 1
    assert new == f'import torch{first}with torch.amp.autocast(\\\r    "cuda", dtype=torch.float16):\n    y = 1\n'
