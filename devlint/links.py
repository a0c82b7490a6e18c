"""Where a rule's docs live, for the links in SARIF (``helpUri``) and the editor
(``codeDescription.href``): only pages that exist, else no link.

devlint has no published home page. A link is made from the installed package's metadata
(a ``Project-URL`` labelled ``Documentation``/``Docs``/``Rules``, pointing at the rendered
``docs/rules.md``, whose anchors are the lower-case codes), or, for the editor only, from the
``docs/rules.md`` of the source tree devlint runs from (an editable install, as the README's
install lines make), as a ``file://`` URI. A SARIF log travels to another machine (code
scanning), so it never carries a ``file://`` link: there the rule docs are in ``help``.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["project_url", "rule_docs_url", "local_rules_page"]

_DOC_LABELS = ("documentation", "docs", "rules")


def project_url(labels: tuple[str, ...]) -> str | None:
    """The first ``Project-URL`` of the installed devlint whose label (lower-cased) is one of
    ``labels`` and whose URL is ``http(s)``; ``None`` when there is none or devlint is not
    installed."""
    try:
        from importlib.metadata import PackageNotFoundError, metadata

        meta = metadata("devlint")
    except (ImportError, PackageNotFoundError):  # pragma: no cover - not installed
        return None
    for entry in meta.get_all("Project-URL") or ():
        label, _, url = entry.partition(",")
        url = url.strip()
        if label.strip().lower() in labels and url.startswith(("https://", "http://")):
            return url
    return None


def local_rules_page() -> Path | None:
    """``docs/rules.md`` of the source tree this devlint is imported from, when that file
    exists (an editable install or a checkout); ``None`` for an installed wheel."""
    page = Path(__file__).resolve().parent.parent / "docs" / "rules.md"
    return page if page.is_file() else None


def rule_docs_url(code: str, local: bool = False) -> str | None:
    """The URL of rule ``code``'s section of the rule docs (anchor: the lower-case code), or
    ``None`` when no page is known to exist. ``local=True`` also accepts the source tree's
    ``docs/rules.md`` as a ``file://`` URI (for an editor on the same machine)."""
    base = project_url(_DOC_LABELS)
    if base is None and local:
        page = local_rules_page()
        base = page.as_uri() if page is not None else None
    return f"{base}#{code.lower()}" if base else None
