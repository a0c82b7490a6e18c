"""SARIF 2.1.0, as GitHub code scanning (``github/codeql-action/upload-sarif``) reads it.

One run; ``tool.driver`` names devlint and lists one ``rules[]`` entry per rule that ran (its
docs as ``help``); each result points at a repository-relative ``artifactLocation.uri`` with
1-based ``startColumn``/``endColumn`` (``endColumn`` just past the flagged code), counted in
Unicode code points (``columnKind``). A notebook's line numbers count from the top of its cell,
named at the start of the message and in the result's ``properties.cell``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from .. import __version__
from ..finding import PARSE_ERROR, Finding
from ..links import project_url, rule_docs_url
from .fields import described, end_of, relative_path

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
def information_uri() -> str | None:
    """The project's home page from the package metadata; ``None`` when it names none
    (devlint has no published page, and a link to a missing one is worse than none)."""
    return project_url(("homepage", "home", "repository", "source"))


def rule_entry(rule: type[Rule]) -> dict[str, Any]:
    """A ``reportingDescriptor`` for one rule: its docs as ``help`` (plain text and
    Markdown) and, when the package names a docs page, ``helpUri`` at its section."""
    docs = rule.docs()
    entry = {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": " ".join(rule.what_it_does.split()) or rule.summary()},
        "help": {"text": docs, "markdown": docs},
        "defaultConfiguration": {"level": "warning"},
    }
    url = rule_docs_url(rule.code)
    if url:  # only a page that exists (see devlint.links); the docs are in ``help`` anyway
        entry["helpUri"] = url
    return entry


PARSE_ERROR_ENTRY = {
    "id": PARSE_ERROR,
    "name": "unreadable-file",
    "shortDescription": {"text": "A file that could not be read, decoded or parsed"},
    "fullDescription": {"text": "devlint could not read, decode or parse this file, so no rule checked it."},
    "help": {"text": "Fix the syntax error or encoding, or exclude the file.",
             "markdown": "Fix the syntax error or encoding, or exclude the file."},
    "defaultConfiguration": {"level": "error"},
}


def result(finding: Finding, index: int, root: Path) -> dict[str, Any]:
    """A SARIF ``result`` for one finding; ``index`` is its rule's place in ``rules[]``."""
    end_line, end_column = end_of(finding)
    item: dict[str, Any] = {
        "ruleId": finding.code,
        "ruleIndex": index,
        "level": "error" if finding.code == PARSE_ERROR else "warning",
        "message": {"text": described(finding)},
        "locations": [{
            "physicalLocation": {
                "artifactLocation": {"uri": relative_path(finding.path, root), "uriBaseId": "%SRCROOT%"},
                "region": {
                    "startLine": finding.line,
                    "startColumn": finding.column + 1,
                    "endLine": end_line,
                    "endColumn": end_column + 1,
                },
            },
        }],
    }
    if finding.cell is not None:
        item["properties"] = {"cell": finding.cell}
    return item


def log(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> dict[str, Any]:
    """The SARIF log as a dict."""
    entries = [rule_entry(r) for r in rules]
    known = {r.code for r in rules}
    if PARSE_ERROR not in known and any(f.code == PARSE_ERROR for f in findings):
        entries.append(PARSE_ERROR_ENTRY)
    for f in findings:  # a finding of a rule outside ``rules`` still needs its entry
        if f.code not in {e["id"] for e in entries}:
            entries.append({"id": f.code, "shortDescription": {"text": f.message}})
    index = {e["id"]: i for i, e in enumerate(entries)}
    return {
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [{
            "tool": {"driver": {
                "name": "devlint",
                "version": __version__,
                "semanticVersion": __version__,
                **({"informationUri": home} if (home := information_uri()) else {}),
                "rules": entries,
            }},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": Path(root).absolute().as_uri() + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": [result(f, index[f.code], root) for f in findings],
        }],
    }


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> str:
    """The SARIF log as indented JSON."""
    return json.dumps(log(findings, rules, root), indent=2) + "\n"
