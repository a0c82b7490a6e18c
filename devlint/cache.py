"""A content-hash cache of findings under ``.devlint_cache/``.

The key is a SHA-256 of the file's bytes, its path, the selection, devlint's version and a
digest of devlint's own source files (so an edited rule never serves stale results). Entries
are written to a temporary file and renamed into place, which is atomic on POSIX and Windows:
concurrent runs (pre-commit, an editor and CI on one checkout) can share the folder. A cache
that cannot be read or written is simply not used.
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


@lru_cache(maxsize=1)
def _code_digest() -> str:
    digest = hashlib.sha256(__version__.encode())
    package = Path(__file__).resolve().parent
    for path in sorted(package.rglob("*.py")):
        if "runtime" not in path.relative_to(package).parts:
            digest.update(path.read_bytes())
    return digest.hexdigest()


class Cache:
    """Findings of already-linted file contents; ``root`` is the folder holding the cache."""

    def __init__(self, root: Path, select: Sequence[str], ignore: Sequence[str]) -> None:
        self.folder = Path(root) / FOLDER
        self.salt = f"{_code_digest()}|{','.join(sorted(select))}|{','.join(sorted(ignore))}"

    def key(self, path: str, data: bytes) -> str:
        return hashlib.sha256(f"{self.salt}|{path}|".encode() + data).hexdigest()

    def get(self, key: str) -> list[Finding] | None:
        try:
            raw = json.loads((self.folder / key[:2] / key).read_text(encoding="utf-8"))
            return [_finding(item) for item in raw]
        except (OSError, ValueError, TypeError, KeyError):
            return None

    def put(self, key: str, findings: list[Finding]) -> None:
        target = self.folder / key[:2] / key
        try:
            if not self.folder.exists():
                self.folder.mkdir(parents=True, exist_ok=True)
                (self.folder / ".gitignore").write_text("# created by devlint\n*\n")
                (self.folder / "CACHEDIR.TAG").write_text("Signature: 8a477f597d28d172789f06886806bc55\n")
            target.parent.mkdir(exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump([asdict(f) for f in findings], out)
            os.replace(temporary, target)
        except OSError:
            pass


def _finding(item: dict) -> Finding:
    fix = item.get("fix")
    if fix is not None:
        fix = Fix(fix["description"], tuple(Edit(**e) for e in fix["edits"]), fix.get("safe", True))
    return Finding(**{**item, "fix": fix})
