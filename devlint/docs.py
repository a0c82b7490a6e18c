"""``docs/rules.md``, generated from the rule classes.

Regenerate it after adding or editing a rule::

    python -m devlint.docs > docs/rules.md

``tests/test_docs.py`` fails while the file is stale.
"""

from __future__ import annotations

import sys

from .rules import all_rules

COMMAND = "python -m devlint.docs > docs/rules.md"


def render() -> str:
    """The Markdown of ``docs/rules.md``: an index table, then each rule's docs."""
    rules = all_rules()
    parts = [
        "# Rules",
        "",
        f"<!-- Generated from the rule classes by `{COMMAND}`; do not edit by hand. -->",
        "",
        "| code | name | summary |",
        "|---|---|---|",
    ]
    parts += [f"| [{r.code}](#{r.code.lower()}) | {r.name} | {r.summary().replace('|', chr(92) + '|')} |" for r in rules]
    for rule in rules:
        body = rule.docs().rstrip("\n").splitlines()
        # one level down: the page has its own title; an anchor per code for the table's links
        parts += ["", f'<a id="{rule.code.lower()}"></a>', ""]
        parts += [("#" + line) if line.startswith("#") and not _in_code(body, i) else line for i, line in enumerate(body)]
    return "\n".join(parts) + "\n"


def _in_code(lines: list[str], index: int) -> bool:
    """Is ``lines[index]`` inside a fenced code block (where ``#`` is a Python comment)?"""
    return sum(1 for line in lines[:index] if line.startswith("```")) % 2 == 1


def main() -> int:
    """Write the Markdown to standard output."""
    sys.stdout.write(render())
    return 0


if __name__ == "__main__":
    sys.exit(main())
