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
