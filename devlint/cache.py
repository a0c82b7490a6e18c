"""A content-hash cache of findings under ``.devlint_cache/``.

The key is a SHA-256 of the file's bytes, its path, the selection, devlint's version and a
digest of devlint's own source files (so an edited rule never serves stale results). Entries
are written to a temporary file and renamed into place, which is atomic on POSIX and Windows:
concurrent runs (pre-commit, an editor and CI on one checkout) can share the folder. A cache
that cannot be read or written is simply not used, and an entry is checked before it is
trusted: its format version, its own key and the shape of every finding; anything else (a
truncated file, another tool's JSON, a hand edit) is ignored and replaced on this run.

Findings that read other files of the project (:mod:`devlint.project`) are stored with those
files' content hashes (``deps``): the entry is served only while every one still hashes the
same, so an edited helper file re-lints the files that import it.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from dataclasses import asdict
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from . import __version__
from .finding import Edit, Finding, Fix

FOLDER = ".devlint_cache"
#: The layout of one entry: ``{"format": FORMAT, "key": <its file name>, "findings": [...]}``.
FORMAT = 3  # 3: a notebook finding's fix edits count lines within its cell


@lru_cache(maxsize=1)
def _code_digest() -> str:
    digest = hashlib.sha256(__version__.encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        if "runtime" not in path.relative_to(package).parts:
            digest.update(path.read_bytes())
    return digest.hexdigest()


def code_digest() -> str:
    """A digest of devlint's version and of its own source files (``runtime/`` left out):
    part of every cache key, so that an edited rule or analysis never serves stale results."""
    return _code_digest()


class Cache:
    """Findings of already-linted file contents; ``root`` is the folder holding the cache."""

    def __init__(self, root: Path, select: Sequence[str], ignore: Sequence[str]) -> None:
        self.folder = Path(root) / FOLDER
        self.salt = f"{_code_digest()}|{','.join(sorted(select))}|{','.join(sorted(ignore))}"

    def key(self, path: str, data: bytes) -> str:
        return hashlib.sha256(f"{self.salt}|{path}|".encode() + data).hexdigest()

    def get(self, key: str, digest=None) -> list[Finding] | None:
        """The findings stored under ``key``, or ``None`` when there is no valid entry or a
        file it depends on changed (``digest``: path -> its content hash now; an entry with
        dependencies is a miss without it)."""
        try:
            raw = json.loads((self.folder / key[:2] / key).read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT or raw.get("key") != key:
            return None
        items = raw.get("findings")
        if not isinstance(items, list):
            return None
        deps = raw.get("deps") or {}
        if not isinstance(deps, dict) or (deps and digest is None):
            return None
        try:
            if any(digest(path) != hashed for path, hashed in deps.items()):
                return None
        except (OSError, TypeError, ValueError):
            return None
        try:
            return [_finding(item) for item in items]
        except (ValueError, TypeError, KeyError, AttributeError):
            return None

    def put(self, key: str, findings: list[Finding], deps: dict[str, str] | None = None) -> None:
        """Store ``findings`` under ``key``, with the content hashes of the other files they
        depend on (``deps``: path -> hash)."""
        target = self.folder / key[:2] / key
        try:
            if not self.folder.exists():
                self.folder.mkdir(parents=True, exist_ok=True)
                (self.folder / ".gitignore").write_text("# created by devlint\n*\n")
                (self.folder / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
            target.parent.mkdir(exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                entry = {"format": FORMAT, "key": key, "findings": [asdict(f) for f in findings]}
                if deps:
                    entry["deps"] = deps
                json.dump(entry, out)
            os.replace(temporary, target)
        except OSError:
            pass


_FIELDS = {"path": str, "line": int, "column": int, "code": str, "message": str, "end_line": int, "end_column": int}
_EDIT_FIELDS = {"line": int, "column": int, "end_line": int, "end_column": int, "text": str}


def _typed(item, fields: dict, optional: dict) -> dict:
    """``item`` if it is a dict with exactly these fields of these types (raises ``TypeError``)."""
    if not isinstance(item, dict) or not set(fields) <= set(item) <= set(fields) | set(optional):
        raise TypeError("not an entry of this cache")
    for name, kind in {**fields, **optional}.items():
        value = item.get(name)
        if name in fields or value is not None:
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise TypeError(f"{name} is not {kind.__name__}")
    return item


def _finding(item) -> Finding:
    """A :class:`Finding` from its stored form (raises ``TypeError`` for any other shape)."""
    item = _typed(item, _FIELDS, {"fix": dict, "cell": int})
    fix = item.get("fix")
    if fix is not None:
        _typed(fix, {"description": str, "edits": list, "safe": bool}, {})
        edits = tuple(Edit(**_typed(e, _EDIT_FIELDS, {"original": str})) for e in fix["edits"])
        fix = Fix(fix["description"], edits, fix["safe"])
    return Finding(**{**item, "fix": fix})
