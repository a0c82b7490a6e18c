"""Bad input never crashes either front end, and never hides a neighbour's finding."""

from __future__ import annotations

import pytest

from devlint.engine import lint

from conftest import devlint, flake8, parse_findings

GOOD = "import torch\nx = torch.ones(2).cuda()\n"
BAD = {
    "syntax_error.py": "import torch\ndef f(:\n    pass\n",
    "undecodable.py": b"import torch\nx = '\xff\xfe\xfa'\n",
    "nul_byte.py": b"import torch\nx = 1\x00\n",
    "empty.py": "",
    "long_expression.py": "import torch\nx = " + " + ".join(["torch.ones(1)"] * 3000) + "\n",
    "deep_parens.py": "import torch\nx = " + "(" * 90 + "torch.ones(1)" + ")" * 90 + "\n",
    "huge.py": "import torch\n" + "".join(f"x{i} = torch.ones({i})\n" for i in range(60000)) + "y = torch.ones(1).cuda()\n",
    "bad_cookie.py": b"# -*- coding: no-such-codec -*-\nimport torch\n",
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_engine_returns_findings_not_exceptions(name):
    content = BAD[name]
    findings = lint(content if isinstance(content, bytes) else content, name)
    assert all(f.code.startswith("DEV") for f in findings)
    if name == "huge.py":
        assert [(f.line, f.code) for f in findings] == [(60002, "DEV102")]
    if name in ("syntax_error.py", "undecodable.py", "nul_byte.py", "bad_cookie.py"):
        assert [f.code for f in findings] == ["DEV000"]
    if name == "long_expression.py":  # the line is skipped and said so; the file is still analysed
        assert [(f.line, f.code) for f in findings] == [(2, "DEV000")] and "too long" in findings[0].message
    if name in ("empty.py", "deep_parens.py"):
        assert findings == []
    if name == "syntax_error.py":
        assert findings[0].line == 2 and "could not parse" in findings[0].message


def test_cli_reports_unparsable_files_and_keeps_going(tmp_tree):
    root = tmp_tree({**BAD, "a_good.py": GOOD, "z_good.py": GOOD})
    result = devlint("check", str(root))
    assert result.returncode == 1 and "Traceback" not in result.stderr + result.stdout
    found = parse_findings(result.stdout)
    assert found["a_good.py"] == {(2, "DEV102")} and found["z_good.py"] == {(2, "DEV102")}
    assert (2, "DEV000") in found["syntax_error.py"]
    assert (60002, "DEV102") in found["huge.py"]


def test_flake8_never_raises_on_bad_files(tmp_tree):
    # CPython's own ast.parse hits RecursionError on the 3,000-term expression, and flake8
    # (before any plugin runs) aborts on it with or without devlint: that file is left out.
    bad = {k: v for k, v in BAD.items() if k != "long_expression.py"}
    root = tmp_tree({**bad, "a_good.py": GOOD, "z_good.py": GOOD})
    result = flake8("--select=DEV,E999", str(root))
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    found = parse_findings(result.stdout)
    assert found["a_good.py"] == {(2, "DEV102")} and found["z_good.py"] == {(2, "DEV102")}
    assert all(code != "DEV000" for codes in found.values() for _, code in codes)


def test_missing_file_is_one_finding(tmp_tree):
    root = tmp_tree({"good.py": GOOD})
    result = devlint("check", str(root / "missing.py"), str(root / "good.py"))
    found = parse_findings(result.stdout)
    assert found["missing.py"] == {(1, "DEV000")} and found["good.py"] == {(2, "DEV102")}
    assert result.returncode == 1


def test_bad_input_is_shown_well(tmp_tree):
    """Issue 23: a binary file's DEV000 says so and prints no raw bytes; a Latin-1 file says it
    is not UTF-8, at the byte; a pyproject.toml that is not TOML shows the line with a caret."""
    root = tmp_tree({"bin.py": b"import torch\n\x00\x01\xff\xfe\x89PNG", "latin.py": b"# caf\xe9\nimport torch\n",
                     "nul.py": b"import torch\nx = 1\x00\n"})
    out = devlint("check", "--no-cache", "bin.py", "latin.py", "nul.py", cwd=root).stdout
    assert "bin.py:1:1: DEV000 binary file (it holds NUL bytes), not Python source: exclude it\n" in out
    # a text file with one NUL is reported at the NUL, as Python refuses it (issue 24), not as binary
    assert "nul.py:2:6: DEV000 could not parse: source code cannot contain null bytes" in out
    assert "\x00" not in out and "\x01" not in out
    assert "latin.py:1:6: DEV000 not UTF-8 (byte 0xe9): save it as UTF-8 or declare its coding" in out
    bad = tmp_tree({"pyproject.toml": '[tool.devlint]\nselect = ["DEV1"\nignore = []\n', "a.py": "x = 1\n"})
    result = devlint("check", "--no-cache", "a.py", cwd=bad)
    assert result.returncode == 2
    assert result.stderr.endswith("Unclosed array (at line 3, column 1)\n   |\n 3 | ignore = []\n   | ^\n")
