"""Apply autofixes to source text (``devlint check --fix``).

Edits use the findings' coordinates: 1-based lines, 0-based columns counted in code points.
Overlapping edits are left for a later pass, as ruff does; the caller lints again after each
pass until nothing more applies.
"""

from __future__ import annotations

from typing import Iterable

from .finding import Edit, Finding


def _offset(starts: list[int], line: int, column: int) -> int:
    return starts[line - 1] + column


def apply(text: str, findings: Iterable[Finding], unsafe: bool = False) -> tuple[str, int]:
    """(text with every non-overlapping fix applied, number of fixes applied).

    Only safe fixes are applied unless ``unsafe``."""
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    chosen: list[tuple[int, int, list[Edit]]] = []
    for finding in findings:
        fix = finding.fix
        if fix is None or not fix.edits or not (fix.safe or unsafe):
            continue
        spans = [(_offset(starts, e.line, e.column), _offset(starts, e.end_line, e.end_column)) for e in fix.edits]
        low, high = min(a for a, _ in spans), max(b for _, b in spans)
        if any(low < other_high and other_low < high for other_low, other_high, _ in chosen):
            continue
        chosen.append((low, high, list(fix.edits)))
    edits = sorted(
        ((_offset(starts, e.line, e.column), _offset(starts, e.end_line, e.end_column), e.text)
         for _, _, group in chosen for e in group),
        reverse=True,
    )
    for begin, end, replacement in edits:
        text = text[:begin] + replacement + text[end:]
    return text, len(chosen)


def fix_source(data: bytes, path: str, select, ignore, unsafe: bool = False, passes: int = 5) -> tuple[bytes, int]:
    """(fixed bytes in the file's own encoding, fixes applied), linting again after each pass
    until no fix applies. Undecodable files are returned unchanged; notebooks go through
    :func:`fix_notebook`."""
    import io
    import tokenize

    from .runner import check_source

    if path.endswith(".ipynb"):
        new, count, _ = fix_notebook(data, path, select, ignore, unsafe, passes)
        return new, count
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        text = data.decode(encoding)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return data, 0
    bom = text.startswith("\ufeff")
    body, total = (text[1:] if bom else text), 0
    for _ in range(passes):
        findings = check_source(body.encode("utf-8"), path, select, ignore)
        body, count = apply(body, findings, unsafe)
        total += count
        if not count:
            break
    if not total:
        return data, 0
    return (("\ufeff" if bom else "") + body).encode(encoding), total


def fix_notebook(data: bytes, path: str, select, ignore, unsafe: bool = False, passes: int = 5):
    """(notebook bytes, fixes applied, [(cell number, source before, source after)]): the
    code cells fixed as one program (an import in one cell serves the others); outputs,
    metadata and the other cells are left as they were (:func:`devlint.notebook.fix`)."""
    from . import notebook

    def fix_text(text: str) -> tuple[str, int]:
        fixed, count = fix_source(text.encode("utf-8"), path[: -len(".ipynb")] + ".py", select, ignore, unsafe, passes)
        return fixed.decode("utf-8"), count

    return notebook.fix(data, fix_text)
