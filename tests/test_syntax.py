"""Issue 24 items 1-2: what libcst misreads (form feeds in indentation) and what the target
Python refuses (a NUL byte, newer syntax), each with its minimised input."""

from __future__ import annotations

import pytest

from devlint import memory_budget, syntax
from devlint.engine import lint
from devlint.parsing import parse_module
from devlint.fix import fix_source

from conftest import devlint, flake8, parse_findings


def found(text: str) -> list[tuple[int, int, str]]:
    return [(f.line, f.column, f.code) for f in lint(text)]


@pytest.mark.parametrize("text, expected", [
    # the fuzz's minimised input (libcst: "no matching outer block for dedent", at line 1)
    ("import torch\nclass A:\n\f def f(self):\n  return torch.ones(1).cuda()\n", [(4, 23, "DEV102")]),
    # a form feed after spaces, then the finding on that very line
    ("import torch\nif 1:\n  x = 1\n  \f  y = torch.ones(1).cuda()\n", [(4, 23, "DEV102")]),
    # a form feed inside a multi-line string is the string's, not indentation
    ("import torch\nif 1:\n  s = '''\n\f  a'''\n\f  y = torch.ones(1).cuda()\n", [(5, 21, "DEV102")]),
])
def test_a_form_feed_in_indentation_keeps_the_findings(text, expected):
    compile(text, "a.py", "exec")
    assert found(text) == expected


def test_a_fix_on_a_form_feed_line_keeps_the_form_feed():
    text = "import torch\nif 1:\n  \f scaler = torch.cuda.amp.GradScaler(enabled=True)\n"
    new, count = fix_source(text.encode(), "a.py", ["DEV"], [])
    assert count == 1 and new == text.replace("torch.cuda.amp.GradScaler(", 'torch.amp.GradScaler("cuda", ').encode()


def test_a_fix_crossing_a_form_feed_line_start_is_dropped_not_applied():
    text = "import torch\nif 1:\n  \f with torch.cuda.amp.autocast(\n    dtype=torch.float16):\n  \f  pass\n"
    assert [f.code for f in lint(text)] == ["DEV206"]
    assert fix_source(text.encode(), "a.py", ["DEV"], []) == (text.encode(), 0)


def test_where_libcst_cannot_read_valid_python_the_line_is_found():
    text = "x = 1\ny = 2\ntry:\n\f with ():\n  x.cuda()\nexcept: pass\nz = 1\n"
    compile(text, "a.py", "exec")
    assert syntax.tokenizer_failure(text, parse_module) == 5  # libcst's own error says line 1


def test_form_feeds_agree_with_flake8(tmp_tree):
    text = "import torch\nclass A:\n\f def f(self):\n  return torch.ones(1).cuda()\n"
    root = tmp_tree({"a.py": text})
    ours = parse_findings(devlint("check", "--no-cache", str(root / "a.py")).stdout)["a.py"]
    theirs = parse_findings(flake8("--select=DEV", str(root / "a.py")).stdout)["a.py"]
    assert ours == theirs == {(4, "DEV102")}


def test_a_nul_byte_is_dev000_at_its_line_and_nothing_else():
    text = "import torch\nx = 'a\x00b'\ny = torch.ones(1).cuda()\n"
    (finding,) = lint(text)
    assert (finding.line, finding.column, finding.code) == (2, 6, "DEV000")
    assert "null bytes" in finding.message


@pytest.fixture
def target(monkeypatch):
    def set_it(version: str) -> None:
        monkeypatch.setenv(syntax.ENV, version)
    return set_it


def test_a_312_fstring_is_refused_for_311(target):
    target("3.11")
    text = 'import torch\nd = {}\nx = f"{d["k"]}"\ny = torch.ones(1).cuda()\n'
    ((line, _, code),) = found(text)  # 3.11 refuses it itself; 3.12+ is told by devlint.syntax
    assert (line, code) == (3, "DEV000")


def test_an_older_target_refuses_newer_syntax(target):
    text = "import torch\nmatch 1:\n    case 1:\n        y = torch.ones(1).cuda()\n"
    assert found(text) == [(4, 26, "DEV102")]
    target("py39")
    (finding,) = lint(text)  # where CPython puts it
    assert finding.code == "DEV000" and "only supported in Python 3.10" in finding.message


def test_a_newer_target_leaves_it_to_libcst(target):
    target("3.14")  # newer than any Python this runs on: the running one cannot judge
    assert found('import torch\nd = {}\nx = f"{d["k"]}"\ny = torch.ones(1).cuda()\n') == [(4, 18, "DEV102")]


def test_target_version_from_pyproject_and_the_command_line(tmp_tree):
    text = "import torch\nmatch 1:\n    case 1:\n        y = torch.ones(1).cuda()\n"
    root = tmp_tree({"pyproject.toml": '[tool.devlint]\ntarget-version = "py39"\n', "a.py": text})
    assert parse_findings(devlint("check", "--no-cache", ".", cwd=root).stdout) == {"a.py": {(4, "DEV000")}}
    again = devlint("check", "--no-cache", "--target-version", "3.10", ".", cwd=root)
    assert parse_findings(again.stdout) == {"a.py": {(4, "DEV102")}}
    bad = devlint("check", "--no-cache", "--target-version", "python3", ".", cwd=root)
    assert bad.returncode == 2 and "target-version must look like" in bad.stderr


@pytest.mark.parametrize("value, expected", [("py311", (3, 11)), ("3.9", (3, 9)), ("PY310", (3, 10))])
def test_parse_target(value, expected):
    assert syntax.parse_target(value) == expected


# ---- item 5: long files (the budgets made small, so that the inputs stay small) -------------

def budget_of(monkeypatch, lines: int) -> None:
    """A memory budget of 1 MB that ``lines`` lines fill (the text and its tokens cost nothing)."""
    monkeypatch.setattr(memory_budget, "MEMORY_BUDGET_MB", 1)
    for name in ("PROCESS_BYTES", "TEXT_COPIES", "TEXT_BYTES_PER_LINE", "TOKEN_BYTES", "CHAR_COPIES",
                 "PARSE_BYTES", "DEPTH_BYTES"):
        monkeypatch.setattr(memory_budget, name, 0)
    monkeypatch.setattr(memory_budget, "LINE_BYTES", (1 << 20) // lines)


@pytest.fixture
def small_budget(monkeypatch):
    monkeypatch.setattr(memory_budget, "PIECE_LINES", 4)
    budget_of(monkeypatch, 20)


def test_the_stdlib_tree_in_pieces_is_the_whole_one(small_budget, monkeypatch):
    import ast

    budget_of(monkeypatch, 100)
    text = ("import torch\nx = '''\ny = 1\nz = 2\n'''\nw = (\n1,\n2)\nif w:\n    pass\nelse:\n    pass\n"
            "v = 1 + \\\n2\n@d\ndef f():\n    return 1\nu = 3\n")
    tree, refused, kept = syntax.refusal(text)
    assert refused is None and kept is None
    assert ast.dump(tree, include_attributes=True) == ast.dump(ast.parse(text), include_attributes=True)
    broken = text + "def g(:\n" + "t = 1\n" * 8
    assert syntax.refusal(broken)[1][:2] == (19, 6)  # the whole text parsed: CPython's own error
    plain = "a = 1\n" * 5 + "if a:\n    b = 2\nelse:\n    b = 3\n" + "c = f(\n    4)\n" * 6
    pieces, whole = syntax._parse(plain, None)[0], ast.parse(plain)
    assert pieces.body[0] is not whole.body[0]
    assert ast.dump(pieces, include_attributes=True) == ast.dump(whole, include_attributes=True)


def test_past_the_line_budget_the_rest_is_one_dev000(small_budget):
    text = "import torch\n" + "".join(f"x{i} = torch.ones(1).cuda()\n" for i in range(39))
    findings = lint(text)
    assert [(f.line, f.code) for f in findings] == [*((n, "DEV102") for n in range(2, 21)), (21, "DEV000")]
    assert findings[-1].message == "lines 21-40 skipped: over the 1 MB memory budget, split the file"


def test_past_the_line_budget_without_a_cut_the_file_is_one_dev000(small_budget):
    text = "import torch\nx = '''\n" + "y = torch.ones(1).cuda()\n" * 30 + "'''\n"
    ((line, column, code),) = found(text)
    assert (line, column, code) == (1, 0, "DEV000")


def test_the_memory_budget_keeps_fewer_lines_the_longer_they_are():
    short = "".join(f"x{i} = y.cuda()\n" for i in range(900_000))
    long = "".join(f"output_tensor_{i:07d} = some_input_tensor_value.cuda(non_blocking=True)\n" for i in range(900_000))
    kept_short, kept_long = memory_budget.estimate(short).kept, memory_budget.estimate(long).kept
    assert kept_short is not None and kept_long is not None and 0 < kept_long < kept_short < 900_000
    # what is kept is charged within the budget, one piece more is not
    lines = long.split("\n")
    bounds = memory_budget.piece_bounds(long, lines)
    within = [b for b in bounds if b <= kept_long]
    fits = memory_budget.plan(lines, within)
    assert fits.kept is None and fits.bytes <= memory_budget.budget_bytes()
    assert memory_budget.plan(lines, [*within, bounds[len(within)]]).kept == kept_long
    assert memory_budget.estimate("".join(short.splitlines(keepends=True)[:100_000])).kept is None


@pytest.mark.parametrize("text, tokens, depth", [
    ("x = y.cuda()\n", 7, 0),
    ("f(f(f(x)))", 10, 12),  # each token once per pair around it: 0+0+1+1+2+2+3+2+1+0
    ("d = {'a (': [1, 2]}  # a comment (\n", 12, 10),  # a string and a comment: one token each
    ('s = f"{a(b)}"\n', 11, 5),  # an f-string's fields are code, its braces brackets
    ("z = (1,\n     2)\n", 7, 3),
    ("x = (1]\n", 5, 1),
])
def test_tokens_and_brackets_are_counted_from_the_text(text, tokens, depth):
    assert memory_budget.counts(text) == (tokens, depth)


def test_deep_brackets_are_refused_before_libcst_parses_them(monkeypatch):
    """50 lines of calls 100 deep: libcst's parser would hold gigabytes (the square of the
    depth); the estimate refuses the file whole, and nothing is parsed by libcst."""
    import libcst

    def no_parse(*args, **kwargs):
        raise AssertionError("libcst parsed a text over the budget")

    monkeypatch.setattr(libcst, "parse_module", no_parse)
    text = "import torch\n" + "".join(f"x{i} = " + "f(" * 100 + "y.cuda()" + ")" * 100 + "\n" for i in range(50))
    assert memory_budget.estimate(text).kept == 0
    ((line, column, code),) = found(text)
    assert (line, column, code) == (1, 0, "DEV000")
    assert "51 lines, over the 600 MB memory budget" in lint(text)[0].message
