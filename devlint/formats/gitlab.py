"""GitLab Code Quality: a JSON array of ``{description, check_name, fingerprint, severity,
location: {path, lines: {begin, end}}}`` with repository-relative paths.

The fingerprint must stay the same while the code does, so that GitLab can tell new findings
from old ones in a merge request: it hashes the path, the code, the flagged line's text
(stripped) and the finding's place among findings of the same path, code and text — never the
line number, which shifts whenever code above it changes.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..finding import PARSE_ERROR, Finding
from .fields import described, end_of, relative_path
from .sources import source_line

if TYPE_CHECKING:  # annotations only: the rules (and libcst) are not loaded to write a report
    from ..rule import Rule


def fingerprints(findings: Sequence[Finding], root: Path) -> list[str]:
    """One stable fingerprint per finding, in order."""
    seen: Counter[tuple[str, str, str]] = Counter()
    prints = []
    for finding in findings:
        text = source_line(finding)
        key = (relative_path(finding.path, root), finding.code, (text if text is not None else finding.message).strip())
        occurrence = seen[key]
        seen[key] += 1
        digest = hashlib.sha256("\0".join((*key, str(occurrence))).encode("utf-8", "surrogatepass"))
        prints.append(digest.hexdigest())
    return prints


def render(findings: Sequence[Finding], rules: Sequence[type[Rule]], root: Path) -> str:
    """The findings as a Code Quality report."""
    report: list[dict[str, Any]] = []
    for finding, fingerprint in zip(findings, fingerprints(findings, root)):
        end_line, _ = end_of(finding)
        report.append({
            "description": f"{finding.code} {described(finding)}",
            "check_name": finding.code,
            "fingerprint": fingerprint,
            "severity": "major" if finding.code == PARSE_ERROR else "minor",
            "location": {"path": relative_path(finding.path, root), "lines": {"begin": finding.line, "end": end_line}},
        })
    return json.dumps(report, indent=2) + "\n"
