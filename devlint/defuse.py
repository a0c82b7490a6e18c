"""Lines that would make libcst's parser explode, blanked before it sees them.

:func:`defuse` replaces each pathological line by ``...`` and reports it as ``DEV000``."""

from __future__ import annotations

import re

from .finding import PARSE_ERROR, Finding

#: libcst's parser is superlinear in the length of one chain of binary operators or trailers
#: (``a + b + ...``, ``a.b.c...``, ``f()()...``, ``x[0][0]...``: 2,000 terms take seconds, 3,000
#: terms 30 s), though linear in the elements of a literal (a 5 MB list is fine). Lines this
#: long holding a chain this long are blanked and reported instead.
LONG_LINE, MANY_OPERATORS = 10_000, 1_000
_CHAIN_PART = re.compile(r"""[-+*/|&%@.(\[{)\]},;:'"\\#]""")


def longest_chain(line: str) -> int:
    """The most operators and trailers at one bracket depth of ``line`` with no ``,``, ``;``
    or ``:`` between them (string literals and a comment left out): the length of its
    longest chain, roughly. A literal's elements are separated by commas, so a long list of
    ``-1.5`` counts 2."""
    depth_counts, best, quote, escaped = [0], 0, "", -1
    for match in _CHAIN_PART.finditer(line):
        char, at = match.group(), match.start()
        if quote:
            if char == "\\" and at != escaped:
                escaped = at + 1
            elif char == quote and at != escaped:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char == "#":
            break
        elif char in ",;:":
            depth_counts[-1] = 0
        elif char in "([{":
            depth_counts[-1] += 1
            best = max(best, depth_counts[-1])
            depth_counts.append(0)
        elif char in ")]}":
            if len(depth_counts) > 1:
                depth_counts.pop()
        else:
            depth_counts[-1] += 1
            best = max(best, depth_counts[-1])
    return best


def defuse(text: str, path: str) -> tuple[str, list[Finding]]:
    """Replace pathological lines by ``...`` (same indentation) and report each as DEV000."""
    if len(text) < LONG_LINE:
        return text, []
    lines = text.split("\n")
    skipped = []
    for i, line in enumerate(lines):
        if len(line) > LONG_LINE and longest_chain(line) > MANY_OPERATORS:
            indent = line[: len(line) - len(line.lstrip())]
            lines[i] = indent + "..."
            skipped.append(Finding(path, i + 1, 0, PARSE_ERROR, f"could not analyse: line of {len(line)} characters is too long (a chain of over {MANY_OPERATORS} operators), skipped", i + 1, 0))
    return ("\n".join(lines), skipped) if skipped else (text, [])
