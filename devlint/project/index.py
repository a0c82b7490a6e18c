"""The project index: summaries of the project's files, kept by content hash, and the view
one linted file has of them through its imports.

:class:`ProjectIndex` is one per process (the CLI's workers, flake8's, the language server):
it reads a file the first time a linted file imports something from it, and keeps its
:func:`devlint.project.summary.summarize` result in memory and under
``.devlint_cache/project/`` by the SHA-256 of its bytes (a changed file is summarised again,
an unchanged one never twice). The language server hands it the text of open buffers
(:meth:`ProjectIndex.overlay`), which win over the disk.

:class:`View` answers the rules' questions for one linted file ("what does this call
return?", "is this base class a module, and what do its ``__init__`` and ``forward`` do?")
and records every file it consulted with its hash (:attr:`View.deps`): the file's findings
depend on them, so the findings cache and the server re-lint when one changes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

from ..cache import code_digest
from ..names import dotted
from . import resolve
from .summary import summarize

#: Bumped when the summary's shape or meaning changes (old cached summaries are ignored).
SUMMARY_FORMAT = 1
#: Set ``DEVLINT_NO_PROJECT=1`` to lint every file alone (to measure the index's cost).
ENABLED = not os.environ.get("DEVLINT_NO_PROJECT")
_EMPTY = {"imports": {}, "functions": {}, "classes": {}}
_IMPORT = re.compile(r"^[ \t]*import[ \t]+([\w. \t,]+)", re.M)
#: dotted names called (``helper(``, ``utils.move(``) and the bases in class headers
_CALLED = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\s*\(")
_BASES = re.compile(r"^[ \t]*class[ \t]+\w+[ \t]*\(([^)]*)\)", re.M)
_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]*)", re.M)
#: the same patterns from their keyword on, searched with the regular expression engine's
#: literal-prefix scan: :func:`at_line_start` keeps the matches whose line holds only blanks before
_LINE_PATTERNS: dict[re.Pattern, re.Pattern] = {
    p: re.compile(p.pattern.removeprefix("^[ \\t]*")) for p in (_IMPORT, _BASES, _FROM)}


def at_line_start(pattern: re.Pattern, text: str):
    """The matches of ``pattern`` (``_IMPORT``, ``_BASES`` or ``_FROM``: ``^[ \\t]*`` and a
    keyword, multi-line) in ``text``, as ``pattern.finditer(text)`` finds them, but each match
    running from the keyword: the pattern's tail searched from the keyword (a fast literal
    scan: 0.4 ms on a 250 KB file, 3 ms for the anchored pattern, which is tried at every
    position), kept where only spaces and tabs precede it on its line. No match of these
    patterns ends inside the blanks that start a later line, so the matches kept are the
    anchored pattern's, one for one (tests/test_project_index.py compares them)."""
    search = _LINE_PATTERNS[pattern].search
    at = 0
    while True:
        match = search(text, at)
        if match is None:
            return
        start = match.start()
        line = text.rfind("\n", 0, start) + 1
        if line == start or not text[line:start].strip(" \t"):
            yield match
            at = match.end()
        else:
            at = start + 1


#: Rules that consult the index, and what in an imported file makes them worth running.
FUNCTION_RULES = ("DEV111",)
CLASS_RULES = ("DEV113", "DEV114")


class ProjectIndex:
    """Summaries of project files (see the module docstring). ``cache_folder``: where to
    keep summaries on disk (``None``: memory only)."""

    def __init__(self, cache_folder: str | Path | None = None) -> None:
        self.folder = Path(cache_folder) / "project" if cache_folder is not None else None
        self._by_stat: dict[str, tuple[tuple, str, dict]] = {}
        self._by_hash: dict[str, dict] = {}
        #: path -> (content hash, summary, or the buffer's text until a summary is asked for)
        self._overlays: dict[str, tuple[str, dict | str]] = {}

    def overlay(self, path: str, text: str | None) -> None:
        """Use ``text`` for ``path`` instead of the disk (an open editor buffer); ``None``
        drops it."""
        path = os.path.abspath(path)
        if text is None:
            self._overlays.pop(path, None)
            return
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        # summarised when another file's lint reads it (:meth:`summary`), not on every keystroke
        self._overlays[path] = (digest, text)

    def digest(self, path: str) -> str:
        """The content hash of ``path`` as the index reads it now (``""``: unreadable)."""
        found = self._overlays.get(path)
        if found is not None:
            return found[0]
        return self._read(path)[0]

    def summary(self, path: str) -> tuple[str, dict]:
        """(content hash, summary) of a project file."""
        found = self._overlays.get(path)
        if found is not None:
            digest, value = found
            if isinstance(value, str):
                text = value
                value = self._summary_of(digest, lambda: text)
                self._overlays[path] = (digest, value)
            return digest, value
        return self._read(path)

    def _read(self, path: str) -> tuple[str, dict]:
        try:
            st = os.stat(path)
        except OSError:
            return "", _EMPTY
        stamp = (st.st_mtime_ns, st.st_size)
        kept = self._by_stat.get(path)
        if kept is not None and kept[0] == stamp:
            return kept[1], kept[2]
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return "", _EMPTY
        digest = hashlib.sha256(data).hexdigest()
        summary = self._summary_of(digest, lambda: data.decode("utf-8", "replace"))
        self._by_stat[path] = (stamp, digest, summary)
        return digest, summary

    def _summary_of(self, digest: str, text) -> dict:
        summary = self._by_hash.get(digest)
        if summary is not None:
            return summary
        entry = None
        if self.folder is not None:  # the summariser's own code is part of the key, as for findings
            key = hashlib.sha256(f"{code_digest()}|{digest}".encode()).hexdigest()
            entry = self.folder / key[:2] / key
        if entry is not None:
            try:
                stored = json.loads(entry.read_text(encoding="utf-8"))
                if isinstance(stored, dict) and stored.get("format") == SUMMARY_FORMAT and isinstance(stored.get("summary"), dict):
                    summary = stored["summary"]
            except (OSError, ValueError, RecursionError):
                summary = None
        if summary is None:
            summary = summarize(text())
            if entry is not None:
                _write(entry, {"format": SUMMARY_FORMAT, "summary": summary})
        self._by_hash[digest] = summary
        return summary

    def view(self, path: str) -> "View | None":
        """The view of the file at ``path`` (``None`` for standard input and the like)."""
        if not path or path.startswith("<") or path == "-":
            return None
        path = os.path.abspath(path)
        folder = os.path.dirname(path)
        return View(self, path, folder, resolve.project_root(folder))


def _write(entry: Path, payload: dict) -> None:
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, temporary = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(payload, out)
        os.replace(temporary, entry)
    except OSError:
        pass


class View:
    """One linted file's view of the project through its imports (see the module docstring)."""

    def __init__(self, index: ProjectIndex, path: str, folder: str, root: str) -> None:
        self.index, self.path, self.folder, self.root = index, path, folder, root
        #: project files consulted -> their content hash when consulted
        self.deps: dict[str, str] = {}

    def _summary(self, path: str) -> dict:
        digest, summary = self.index.summary(path)
        if path != self.path:
            self.deps[path] = digest
        return summary

    # ---- imports ----------------------------------------------------------------------------
    def _module(self, folder: str, level: int, module: str) -> str | None:
        found = resolve.module_file(folder, self.root, level, module)
        return None if found == self.path else found

    def _symbol(self, file: str, name: str, depth: int = 0) -> tuple[str, str] | None:
        """(file, name) where ``name`` of ``file`` is defined, following a package's
        re-export (``from .helpers import move`` in ``__init__.py``) a few times."""
        summary = self._summary(file)
        if name in summary["functions"] or name in summary["classes"]:
            return file, name
        imported = summary["imports"].get(name)
        if imported is None or depth > 3 or imported[2] is None:
            return None
        level, module, original = imported
        target = self._module(os.path.dirname(file), level, module)
        return self._symbol(target, original, depth + 1) if target is not None else None

    def _target(self, level: int, module: str, name: str | None, rest: list[str]) -> tuple[str, str] | None:
        """The project definition that ``<import>.<rest>`` names."""
        if name is not None:  # from <module> import name
            if not rest:
                file = self._module(self.folder, level, module)
                return self._symbol(file, name) if file is not None else None
            module = f"{module}.{name}" if module else name  # from pkg import mod; mod.f
        if len(rest) != 1:
            if len(rest) > 1:
                return self._target(level, f"{module}.{'.'.join(rest[:-1])}", None, rest[-1:])
            return None
        file = self._module(self.folder, level, module)
        return self._symbol(file, rest[0]) if file is not None else None

    def definition(self, expr, names) -> tuple[str, str] | None:
        """(file, name) of the project function or class that a libcst Name/Attribute
        ``expr`` names through the file's imports (``names``: its
        :class:`devlint.names.ImportTable`), or ``None``."""
        text = dotted(expr)
        if text is None:
            return None
        head, *rest = text.split(".")
        relative = names.relative_from.get(head)
        if relative is not None:
            return self._target(relative[0], relative[1], relative[2], rest)
        full = names.aliases.get(head)
        if full is None or full.split(".", 1)[0] == "torch":
            return None
        *module, last = full.split(".") if "." in full else (full,)
        if not module:  # import utils; utils.f
            return self._target(0, full, None, rest)
        # from a.b import c (c a function, a class or a submodule) or import a.b as m
        found = self._target(0, ".".join(module), last, rest)
        return found if found is not None or not rest else self._target(0, full, None, rest)

    # ---- what the rules ask ---------------------------------------------------------------
    def call_kind(self, func, names) -> str | None:
        """What calling ``func`` gives: ``"moves"``, ``"loader"``, ``"loaders"``, ``"cpu"``,
        ``"cpub"`` (see :mod:`devlint.project.summary`) for a project function, ``"module"`` for a project
        ``nn.Module`` class (a model built, not moved), else ``None``."""
        found = self.definition(func, names)
        if found is None:
            return None
        kind = self._summary(found[0])["functions"].get(found[1])
        if kind is None and self._is_module(*found, set()):
            return "module"
        return kind

    def module_class(self, expr, names) -> tuple[str, str] | None:
        """(file, name) of the project ``nn.Module`` subclass ``expr`` names, else ``None``."""
        found = self.definition(expr, names)
        return found if found is not None and self._is_module(*found, set()) else None

    def class_info(self, file: str, name: str) -> dict | None:
        """The summary of class ``name`` of ``file`` (see :mod:`devlint.project.summary`)."""
        return self._summary(file)["classes"].get(name)

    def _bases(self, file: str, name: str) -> list[tuple[str, str]]:
        """(file, name) of each base class of a project class that is itself a project class."""
        info = self.class_info(file, name)
        if info is None:
            return []
        summary = self._summary(file)
        found = []
        for base in info["bases"]:
            head, *rest = base.split(".")
            if not rest and head in summary["classes"] and head != name:
                found.append((file, head))
                continue
            imported = summary["imports"].get(head)
            if imported is None:
                continue
            level, module, original = imported
            if original is not None and not rest:
                target = self._module(os.path.dirname(file), level, module)
                symbol = self._symbol(target, original) if target is not None else None
            elif len(rest) == 1:
                module = module if original is None else f"{module}.{original}"
                target = self._module(os.path.dirname(file), level, module)
                symbol = self._symbol(target, rest[0]) if target is not None else None
            else:
                symbol = None
            if symbol is not None:
                found.append(symbol)
        return found

    def _is_module(self, file: str, name: str, seen: set) -> bool:
        if (file, name) in seen or len(seen) > 20:
            return False
        seen.add((file, name))
        info = self.class_info(file, name)
        if info is None:
            return False
        return info["torch"] or any(self._is_module(f, n, seen) for f, n in self._bases(file, name))

    def inherited(self, file: str, name: str) -> tuple[set[str], set[str], set[str], str | None]:
        """(plain tensor attributes set in an ancestor's ``__init__``, attributes an ancestor's
        ``forward`` reads, methods of the ancestors, the first ancestor's name) of a project
        class, its own ones left out."""
        tensors, reads, methods = set(), set(), set()
        first = None
        stack, seen = list(self._bases(file, name)), {(file, name)}
        while stack and len(seen) < 20:
            key = stack.pop(0)
            if key in seen:
                continue
            seen.add(key)
            info = self.class_info(*key)
            if info is None:
                continue
            first = first or key[1]
            tensors.update(info["tensors"])
            reads.update(info["reads"])
            methods.update(info["methods"])
            stack.extend(self._bases(*key))
        return tensors, reads, methods, first

    def base_classes(self, bases, names) -> list[tuple[str, str]]:
        """(file, name) of each project ``nn.Module`` class among a libcst class's ``bases``."""
        found = []
        for base in bases:
            target = self.module_class(base.value, names)
            if target is not None:
                found.append(target)
        return found

    # ---- which rules an import makes worth running ---------------------------------------
    def _class_rules(self, found: tuple[str, str], used: str, no_forward: bool) -> set[str]:
        """The class rules a subclass of the project module class ``found`` (written ``used``
        in the class header) needs forced: DEV113 when that class or an ancestor sets plain
        tensors, or reads attributes in a ``forward`` the subclass inherits; DEV114 when the pre-check cannot tell the
        subclass is a module: no ``forward`` of its own (``no_forward``) and a base not named
        ``*Module``/``*Model``/``*Loss``."""
        tensors, reads, _, _ = self.inherited(*found)
        info = self.class_info(*found) or {}
        codes = set()
        if tensors or info.get("tensors") or (no_forward and (reads or info.get("reads"))):
            codes.add("DEV113")
        if no_forward and not used.rsplit(".", 1)[-1].endswith(("Module", "Model", "Loss")):
            codes.add("DEV114")
        return codes

    def forced_rules(self, text: str, scan=None) -> set[str]:
        """Codes of the rules that this file's imports of the project make worth running
        though the text pre-screen or the pre-check would skip them: DEV111 where it calls a
        project function with a summary, DEV113/DEV114 where a class derives from a project
        ``nn.Module`` class. Only the imported names the text calls (a capitalised name builds a
        class, no function) or derives from are looked up, and only in a text that names
        ``torch``, as the rules need (this runs on every file). ``scan``, a
        :class:`devlint.project.call_scan.CallScan` kept per document (the language server's),
        searches the calls again only around what changed since its last text."""
        if "import" not in text or "torch" not in text:  # the rules need torch in the text anyway
            return set()
        imports = [i for i in _imports(text) if i[0] or i[1].split(".", 1)[0] not in resolve._SKIPPED]
        if not imports:
            return set()
        # only names whose head an import binds are looked up: the scan for calls is
        # anchored on those heads (the same matches as ``_CALLED`` for them, ~3x faster)
        called = calls_pattern({i[3] for i in imports})
        found = called.findall(text) if scan is None else scan.names(text, called)
        calls = {c for c in found if not c.rsplit(".", 1)[-1][:1].isupper()}  # no class
        headers = list(at_line_start(_BASES, text))
        bases: dict[str, bool] = {}  # base -> some class deriving from it lacks a forward
        for i, header in enumerate(headers):
            body = text[header.end():headers[i + 1].start() if i + 1 < len(headers) else len(text)]
            for base in header.group(1).split(","):
                bases[base.strip()] = bases.get(base.strip(), False) or "def forward(" not in body
        # the names used, by their head (the local name an import binds), in the order met:
        # each import then looks up its own (was: every import against every name used)
        by_head: tuple[dict[str, list], dict[str, list]] = ({}, {})
        for use, table in zip((calls, bases), by_head):
            for used in use:
                head, _, rest = used.partition(".")
                table.setdefault(head, []).append((used, rest))
        codes: set[str] = set()
        for level, module, name, local in imports:
            for table, wanted in zip(by_head, (FUNCTION_RULES, CLASS_RULES)):
                if set(wanted) <= codes:
                    continue
                for used, rest in table.get(local, ()):
                    found = self._target(level, module, name, rest.split(".") if rest else [])
                    if found is None:
                        continue
                    if wanted is FUNCTION_RULES and self._summary(found[0])["functions"].get(found[1]):
                        codes.update(wanted)
                    elif wanted is CLASS_RULES and self._is_module(*found, set()):
                        codes.update(self._class_rules(found, used, bases[used]))
        return codes


def calls_pattern(heads) -> re.Pattern:
    """The pattern of a call of a dotted name whose head is one of ``heads`` (the local names
    the imports bind): group 1 is the dotted name."""
    alternatives = "|".join(re.escape(h) for h in sorted(heads, key=lambda h: (-len(h), h)))  # longest first
    return re.compile(rf"(?<![\w.])((?:{alternatives})(?:\.[\w.]*)?)\s*\(")


def _imports(text: str):
    """(level, module, imported name or ``None``, the local name it binds) of each import of
    ``text``, found by regular expressions (no parse: this runs on every file)."""
    for match in at_line_start(_IMPORT, text):
        for part in match.group(1).split(","):
            words = part.split()
            if not words:
                continue
            if len(words) == 3 and words[1] == "as":
                yield 0, words[0], None, words[2]
            else:
                yield 0, words[0].split(".", 1)[0], None, words[0].split(".", 1)[0]
    for match in at_line_start(_FROM, text):
        body = match.group(3).replace("\\\n", " ").strip().strip("()")
        for part in body.replace("\n", ",").split(","):
            words = part.split("#", 1)[0].split()
            if not words or words[0] == "*":
                continue
            local = words[2] if len(words) == 3 and words[1] == "as" else words[0]
            yield len(match.group(1)), match.group(2), words[0], local
