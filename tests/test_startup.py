"""Startup (issue 27): the command line loads the linter only to lint. ``--version``, ``--help``,
the help of each command and ``devlint rule`` (the docs read from the rule files as text)
import neither libcst nor the engine, the rules, the runner or flake8; each case runs in a
fresh interpreter and reads its ``sys.modules``."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import run

HEAVY = ("libcst", "flake8", "devlint.engine", "devlint.rules", "devlint.runner", "devlint.check_command")


@pytest.mark.parametrize("argv", [["--version"], ["--help"], [], ["check", "--help"], ["rule", "--help"],
                                  ["server", "--help"], ["rule", "DEV102"], ["rule", "--all"]])
def test_startup_loads_no_linter(argv):
    code = (
        "import json, sys\n"
        "from devlint.cli import main\n"
        f"rc = main({argv!r})\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["check", "--help"]])
def test_version_and_help_load_no_formats(argv):
    """``--version`` and the help read the format names from ``format_names`` alone: the
    formats package (with the finding classes and ``dataclasses``) is not imported."""
    code = (
        "import json, sys\n"
        "from devlint.cli import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps([m for m in ('devlint.formats', 'devlint.finding', 'dataclasses') if m in sys.modules]))\n"
    )
    result = run(sys.executable, "-c", code)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == []


def test_check_still_loads_the_linter(tmp_tree):
    """The same probe sees the linter once ``check`` runs (the probe can fail)."""
    root = tmp_tree({"a.py": "import torch\nx = torch.ones(1).cuda()\n"})
    code = (
        "import json, sys\n"
        "from devlint.cli import main\n"
        f"rc = main(['check', '--no-cache', '-j', '1', {str(root)!r}])\n"
        "print(json.dumps(['libcst' in sys.modules, 'devlint.engine' in sys.modules, rc]))\n"
    )
    result = run(sys.executable, "-c", code)
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [True, True, 1]


#: A run whose files all fail the pre-check: a file without torch (no rule's text pre-screen
#: passes) and a torch file that passes some rule's text pre-screen but no rule's ``ast`` pre-check.
UNLINTED = {"plain.py": "def double(x):\n    return x * 2\n",
            "model.py": "import torch\n\n\ndef add(a, b):\n    return a + b\n"}


def test_unlinted_files_fail_every_precheck():
    """The premise of the next test: ``model.py`` gets past the text pre-screen (so the ``ast``
    pre-check, not the text, is what spares it) and no rule is a candidate in either file."""
    from devlint.engine import enabled_rules, triggered
    from devlint.precheck import candidates

    rules = enabled_rules()
    assert triggered(UNLINTED["model.py"], rules)
    assert not triggered(UNLINTED["plain.py"], rules)
    assert candidates(UNLINTED["model.py"], triggered(UNLINTED["model.py"], rules))[0] == []


@pytest.mark.xfail(strict=True, reason="issue 27, not done: the rule modules, read for their triggers and "
                                       "pre-check predicates, import libcst (benchmarks/results.md, session 12)")
def test_check_of_files_failing_the_precheck_loads_no_libcst(tmp_tree):
    """``check`` on files that all fail the pre-check reports nothing and never imports libcst
    (strict: once the rules' pre-check is read from a module without libcst, drop the mark)."""
    root = tmp_tree(UNLINTED)
    code = (
        "import json, sys\n"
        "from devlint.cli import main\n"
        f"rc = main(['check', '--no-cache', '--isolated', {str(root / 'plain.py')!r}, {str(root / 'model.py')!r}])\n"
        "print(json.dumps([rc, 'libcst' in sys.modules]))\n"
    )
    result = run(sys.executable, "-c", code)
    lines = result.stdout.strip().splitlines()
    assert lines[0] == "All checks passed (2 files)."
    assert json.loads(lines[-1]) == [0, False]
