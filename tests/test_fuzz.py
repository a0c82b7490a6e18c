"""Property-based fuzzing: generated programs with torch/AMP code spliced in.

Each program is built from the rules' own flagged and clean examples, autofixable AMP calls
(also inside f-strings, decorators and multi-line calls), nesting, ``# noqa`` comments,
characters that ``str.splitlines()`` breaks at but Python does not, form feeds in front of
a line's indentation, CRLF/CR/mixed line endings, a UTF-8 BOM or a latin-1 coding cookie, and
now and then what a Python refuses (a NUL byte, syntax newer than the running Python, or
newer than a ``target-version`` drawn for the program). For every program:

1. the engine raises nothing, and reports a DEV000 (and nothing else) exactly when the
   target Python refuses the program;
2. the CLI's findings (``# noqa`` by :mod:`devlint.noqa`) are flake8's (its own ``# noqa``);
3. ``--fix`` output compiles, changes only lines its findings' fixes cover, keeps every
   byte outside them, and a second ``--fix`` changes nothing; a read-only file is left as
   it was, its fixes reported as a write failure.

The CI budget is the ``fuzz`` profile of ``tests/conftest.py`` (a few hundred programs); a
long run by hand: ``python -m pytest tests/test_fuzz.py --hypothesis-profile=long`` (or
``DEVLINT_FUZZ=long``), 10,000 programs.
"""

from __future__ import annotations

import ast
import difflib
import os
import stat
import textwrap

import pytest
from hypothesis import assume, given, strategies as st

from devlint import source, syntax
from devlint.fix import compiles, fix_source, write_atomic
from devlint.engine import lint, triggered
from devlint.rules import all_rules
from devlint.runner import check_source

ODD = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
WORDS = st.text(alphabet=st.sampled_from([*"ab_ é1", *ODD, "\t", "ü", "\u00a0", "'"]), max_size=6)

EXAMPLES = sorted({textwrap.dedent(e).strip("\n") for r in all_rules() for e in (*r.flagged, *r.clean)})

#: Fixable (and deliberately unfixable) AMP spellings; ``T`` is the torch alias.
FIXABLE = [
    "scaler = T.cuda.amp.GradScaler(enabled=True)",
    "scaler = T.cuda.amp.GradScaler()",
    "scaler = T.cpu.amp.GradScaler(init_scale=2.0 ** 16)",
    "with T.cuda.amp.autocast(\n    dtype=T.float16,\n):\n    y = 1",
    "with T.cpu.amp.autocast(dtype=T.bfloat16):  # a comment\n    y = 2",
    "with T.cuda.amp.autocast(True):\n    y = 3",
    'print(f"{T.cuda.amp.GradScaler(enabled=True)}")',
    "print(f'{T.cuda.amp.GradScaler()!r:>10}')",
    'print(f"""{T.cuda.amp.GradScaler(enabled=False)}""")',
    "class Sq(T.autograd.Function):\n    @staticmethod\n    @T.cuda.amp.custom_fwd\n    def forward(ctx, x):\n        return x * x",
    "s = [T.cuda.amp.GradScaler(enabled=True), T.cuda.amp.GradScaler(enabled=False)]",
    "a = T.cuda.amp.GradScaler(enabled=True); b = T.cuda.amp.GradScaler(enabled=False)",
    "x = T.ones(2).cuda()",
    'y = T.zeros(3, device="cuda")',
    "z = T.load('w.pt')",
    "scaler = T.cuda.amp.GradScaler(\n    enabled=True,  # keep\n)",
    "x = 1 + \\\n    T.cuda.amp.GradScaler(enabled=True).get_scale()",
    "with T.cuda.amp.autocast(\\\n    dtype=T.float16):\n    y = 4",
]

#: What some Python refuses: a NUL byte, 3.12 syntax (refused by 3.11), 3.10 syntax (by a py39 target).
REFUSED = ['n = "a\x00b"', 'k = f"{ {"a": 1}["a"]}"', "type Alias = int", "match 1:\n    case 1:\n        pass"]

NOQA = ["", "", "", "  # noqa", "  # noqa: DEV102", "  # noqa:DEV2", "  # NOQA: DEV206,E501 reason", "  # noqa: DEV1"]
HEADS = ["if T.cuda.is_available():", "def f():", "class C:", "for i in range(2):", "with T.no_grad():",
         "try:", "while False:"]


@st.composite
def statement(draw) -> str:
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.sampled_from(EXAMPLES)).replace("torch.", "T.")
    if kind == 1:
        return draw(st.sampled_from(FIXABLE))
    if kind == 2:
        return f'v = "{draw(WORDS).replace(chr(39), "")}"'
    if kind == 3:
        return f"# {draw(WORDS)}" if draw(st.integers(0, 30)) else draw(st.sampled_from(REFUSED))
    return draw(st.sampled_from(["", "\f", "pass", "w = (1,\n     2)", "u = '''a\n\u2028b'''"]))


@st.composite
def block(draw, depth: int = 0) -> list[str]:
    lines: list[str] = []
    for _ in range(draw(st.integers(1, 4))):
        if depth < 2 and draw(st.integers(0, 4)) == 0:
            head = draw(st.sampled_from(HEADS))
            indent = draw(st.sampled_from(["    ", "\t", "  "]))
            body = [indent + line if line.strip() else line for line in draw(block(depth + 1))]
            if not any(line.strip() and not line.strip().startswith("#") for line in body):
                body.append(indent + "pass")
            lines += [head, *body]
            if head == "try:":
                lines += ["except Exception:", indent + "pass"]
            continue
        text = draw(statement())
        parts = text.split("\n")
        parts[-1] += draw(st.sampled_from(NOQA)) if not parts[-1].endswith("\\") else ""
        lines += parts
    return lines


@st.composite
def program(draw) -> tuple[str, bytes]:
    """(a name for it, its bytes)."""
    alias = draw(st.sampled_from(["torch", "T"]))
    head = ["import torch", "import torch.nn as nn"] + (["import torch as T"] if alias == "T" else [])
    body = draw(block())
    if draw(st.integers(0, 3)) == 0:  # a form feed resets the indentation count: Python ignores what precedes it
        chosen = draw(st.sets(st.integers(0, len(body) - 1), max_size=4))
        body = [draw(st.sampled_from(["\f", "  \f", "\t\f", "\f\f"])) + line if i in chosen else line
                for i, line in enumerate(body)]
    text = "\n".join([*head, *body]).replace("T.", f"{alias}." if alias == "torch" else "T.")
    newline = draw(st.sampled_from(["\n", "\n", "\r\n", "\r", "mixed"]))
    if newline == "mixed":
        pick = draw(st.randoms(use_true_random=False))
        parts = text.split("\n")
        newline = pick.choice(["\n", "\r\n", "\r"])
        text = "".join(part + pick.choice(["\n", "\r\n", "\r"]) for part in parts[:-1]) + parts[-1]
    else:
        text = text.replace("\n", newline)
    text += draw(st.sampled_from([newline, ""]))
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "bom", "latin-1"]))
    if encoding == "latin-1":
        text = "# -*- coding: latin-1 -*-" + newline + "".join(c if ord(c) < 256 else "x" for c in text)
        return "latin1.py", text.encode("latin-1")
    data = text.encode("utf-8")
    return ("bom.py", b"\xef\xbb\xbf" + data) if encoding == "bom" else ("plain.py", data)


def _flake8():
    """A flake8 Application set up once, with only devlint's plugin, that lints one path."""
    from flake8.main.application import Application

    app = Application()
    app.initialize(["--isolated", "--select=DEV", "-j", "1", os.devnull])
    checkers = app.plugins.checkers
    app.plugins = app.plugins._replace(checkers=checkers._replace(
        tree=[p for p in checkers.tree if p.plugin.package == "devlint"], logical_line=[], physical_line=[]))
    found: list[tuple[int, int, str]] = []
    app.formatter.handle = lambda error: found.append((error.line_number, error.column_number, error.code))

    def run(path: str) -> set[tuple[int, int, str]]:
        found.clear()
        app.options.filenames = [path]
        app.make_file_checker_manager([path])
        app.run_checks()
        app.file_checker_manager.report()
        return set(found)

    return run


@pytest.fixture(scope="module")
def flake8_run():
    return _flake8()


def _changed_lines(before: str, after: str) -> set[int]:
    """1-based lines of ``before`` that differ in ``after`` (Python's lines, each with its
    own line ending: a CR turned LF is a change)."""
    old, new = source.split_lines(before, keepends=True), source.split_lines(after, keepends=True)
    changed: set[int] = set()
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return changed


def _refused(data: bytes, target: tuple[int, int]) -> bool:
    """Does the target Python refuse these bytes (a parse error, a NUL byte)?"""
    try:
        ast.parse(source.decode(data).text, feature_version=target)
    except (SyntaxError, ValueError):
        return True
    return False


@given(generated=program(), target=st.sampled_from([None, None, (3, 9)]), read_only=st.integers(0, 9))
def test_generated_programs(flake8_run, tmp_path_factory, generated, target, read_only):
    name, data = generated
    path = str(tmp_path_factory.mktemp("fuzz") / name)
    with open(path, "wb") as out:
        out.write(data)
    syntax.set_target_version(target)
    try:
        _check_program(flake8_run, path, data, target or syntax.target_version(), read_only == 0)
    finally:
        syntax.set_target_version(None)


def _check_program(flake8_run, path: str, data: bytes, target: tuple[int, int], read_only: bool) -> None:
    if _refused(data, target):  # one DEV000 (before # noqa), unless no rule's trigger is in the text
        expected = ["DEV000"] if triggered(source.decode(data).text, all_rules()) else []
        assert [f.code for f in lint(data, path)] == expected
        assert fix_source(data, path, ["DEV"], []) == (data, 0)
        return
    ours = check_source(data, path, ["DEV"], [])
    assert not [f for f in ours if f.code == "DEV000"], ours
    assert {(f.line, f.column + 1, f.code) for f in ours} == flake8_run(path)

    fixed, count = fix_source(data, path, ["DEV"], [])
    if not count:
        assert fixed == data
        return
    assert compiles(fixed)
    assert fix_source(fixed, path, ["DEV"], []) == (fixed, 0)
    before, after = source.decode(data), source.decode(fixed)
    assert (before.encoding, before.bom) == (after.encoding, after.bom)
    covered = {n for f in ours if f.fix is not None for e in f.fix.edits for n in range(e.line, e.end_line + 1)}
    assert _changed_lines(before.text, after.text) <= covered
    if read_only:
        os.chmod(path, 0o444)
        with pytest.raises(PermissionError, match="read-only"):
            write_atomic(path, fixed)  # what --fix does with the fixed bytes
        with open(path, "rb") as written:
            assert written.read() == data
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o444
