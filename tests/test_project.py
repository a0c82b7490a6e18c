"""Promises of the project itself: no torch in the linter, README in step with the rules."""

from __future__ import annotations

import ast
import re
import sys

from devlint.rules import all_rules

from conftest import ROOT, run


def test_linter_runs_without_torch(tmp_tree):
    root = tmp_tree({"a.py": "import torch\nx = torch.ones(1).cuda()\n"})
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "from devlint.cli import main\n"
        f"rc = main(['check', {str(root)!r}])\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
        "sys.exit(rc)\n"
    )
    result = run(sys.executable, "-c", code)
    assert result.returncode == 1, result.stderr
    assert "DEV102" in result.stdout


def test_no_torch_import_outside_runtime():
    offenders = []
    for path in (ROOT / "devlint").rglob("*.py"):
        if "runtime" in path.relative_to(ROOT / "devlint").parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):  # statements, not examples in strings
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "torch" or n.startswith("torch.") for n in names):
                offenders.append(f"{path}:{node.lineno}")
    assert offenders == []


def test_readme_rule_table_matches_rules():
    readme = (ROOT / "README.md").read_text()
    rows = re.findall(r"^\| `?(DEV\d{3})`? \| `?([a-z0-9-]+)`? \|", readme, re.M)
    assert rows == [(r.code, r.name) for r in all_rules()]


def test_readme_opens_with_the_two_commands():
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```(?:bash|sh|console)?\n(.*?)```", readme, re.S)
    first = blocks[0].splitlines()[0]
    assert "pip install" in first and "benchmarks/ecosystem.py" in first and "pytest" in blocks[0]
    ci = (ROOT / ".ci" / "run").read_text()
    test_command = next(line for line in blocks[0].splitlines() if "pytest" in line).strip()
    assert test_command in ci


def test_readme_first_command_matches_the_ledger():
    """The first command's packages are in the ecosystem check, and the README's count of
    their judged findings is the ledger's (all true positives)."""
    readme = (ROOT / "README.md").read_text()
    names = re.search(r"ecosystem\.py --only ([\w,-]+)", readme).group(1).split(",")
    rows = [line.split("\t") for line in (ROOT / "benchmarks" / "ecosystem" / "ledger.tsv").read_text().splitlines()[1:]]
    ours = [r for r in rows if r[2] in names]
    assert ours and all(r[0] == "tp" for r in ours)
    assert f"({len(ours)} findings, all judged true)" in " ".join(readme.split())
    source = (ROOT / "benchmarks" / "ecosystem.py").read_text()
    assert all(f'Package("{n}"' in source for n in names)


def test_one_rule_per_file_named_after_it():
    for rule in all_rules():
        module = sys.modules[rule.__module__]
        assert module.__file__.endswith(rule.name.replace("-", "_") + ".py"), rule.code


def test_no_rule_imports_another_rule():
    """Shared logic lives in the analyses (``devlint.amp``, ``devlint.rule``...), never in a rule."""
    import ast

    offenders = []
    for path in (ROOT / "devlint" / "rules").glob("*.py"):
        if path.name == "__init__.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:  # ``from .x import``: a sibling rule
                offenders.append(f"{path.name}: from .{node.module or ''} import ...")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("devlint.rules."):
                offenders.append(f"{path.name}: from {node.module} import ...")
    assert offenders == []


def test_rule_messages_are_short_and_plain():
    """A message reads code first, what is wrong, then the fix in a few words: under 80 characters
    with its code, no "Please", no trailing period (details belong to the rule docs)."""
    for rule in all_rules():
        line = f"{rule.code} {rule.message}"
        assert len(line) < 80, line
        assert "please" not in line.lower() and not line.endswith("."), line
