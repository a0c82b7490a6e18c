"""``docs/rules.md`` is generated from the rule classes and must be kept in step; README.md's console example is real."""

from __future__ import annotations

import subprocess
import sys

from devlint import docs
from devlint.rules import all_rules

from conftest import ROOT


def test_docs_rules_md_is_up_to_date():
    path = ROOT / "docs" / "rules.md"
    current = path.read_text() if path.exists() else ""
    assert current == docs.render(), f"docs/rules.md is stale: regenerate it with `{docs.COMMAND}`"


def test_every_rule_has_a_section():
    text = docs.render()
    for rule in all_rules():
        assert f"## {rule.name} ({rule.code})" in text
        assert f'<a id="{rule.code.lower()}"></a>' in text


def test_readme_console_example_is_what_devlint_prints(tmp_path):
    """README.md's console block is the real output on fixtures/readme/train.py, fix included."""
    readme = (ROOT / "README.md").read_text()
    block = readme.split("```console\n$ devlint check train.py\n", 1)[1].split("```", 1)[0]
    shown, rest = block.split("...\n", 1)
    found_line, fix_cmd, *fixed = rest.strip().splitlines()
    assert fix_cmd == "$ devlint check --fix --unsafe-fixes train.py"
    (tmp_path / "train.py").write_text((ROOT / "fixtures" / "readme" / "train.py").read_text())
    first = subprocess.run([sys.executable, "-m", "devlint", "check", "--isolated", "train.py"],
                           cwd=tmp_path, capture_output=True, text=True)
    assert first.returncode == 1
    assert first.stdout.startswith(shown)
    assert found_line in first.stdout.splitlines()
    second = subprocess.run([sys.executable, "-m", "devlint", "check", "--isolated", "--fix", "--unsafe-fixes",
                             "train.py"], cwd=tmp_path, capture_output=True, text=True)
    assert second.returncode == 0
    assert (second.stdout + second.stderr).strip().splitlines() == fixed
