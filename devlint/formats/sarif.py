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
from typing import Any, Sequence

from .. import __version__
from ..engine import PARSE_ERROR
from ..finding import Finding
from ..rule import Rule
from . import described, end_of, relative_path

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
VERSION = "2.1.0"
#: Used when the installed package's metadata names no home page.
DEFAULT_URI = "https://pypi.org/project/devlint/"


def _project_url(labels: tuple[str, ...]) -> str | None:
    """The first ``Project-URL`` of the installed package whose label is one of ``labels``."""
    try:
        from importlib.metadata import PackageNotFoundError, metadata

        meta = metadata("devlint")
    except (ImportError, PackageNotFoundError):  # pragma: no cover - not installed
        return None
    for entry in meta.get_all("Project-URL") or ():
        label, _, url = entry.partition(",")
        if label.strip().lower() in labels and url.strip():
            return url.strip()
    return meta.get("Home-page") if "homepage" in labels else None


def information_uri() -> str:
    """The project's home page from the package metadata, else its PyPI page."""
    return _project_url(("homepage", "home", "repository", "source")) or DEFAULT_URI


def docs_uri() -> str:
    """Where the rule docs live: the package's ``Documentation`` URL, else its home page."""
    return _project_url(("documentation", "docs")) or information_uri()


def rule_entry(rule: type[Rule]) -> dict[str, Any]:
    """A ``reportingDescriptor`` for one rule: its docs as ``help`` (plain text and
    Markdown) and ``helpUri`` pointing at its section of the rule docs."""
    docs = rule.docs()
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary()},
        "fullDescription": {"text": " ".join(rule.what_it_does.split()) or rule.summary()},
        "helpUri": f"{docs_uri()}#{rule.code.lower()}",
        "help": {"text": docs, "markdown": docs},
        "defaultConfiguration": {"level": "warning"},
    }


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
                "informationUri": information_uri(),
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
