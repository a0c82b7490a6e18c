"""What the protocol thread and the lint thread share, as one object with one lock: the open
documents' lint states and change generations, the event loop (the lint thread hands its
results and log lines to it), what was last published, and the lint thread itself.

The protocol thread (the event loop: pygls' handlers) schedules lints and publishes their
results; the lint thread runs :func:`~devlint.lsp.document_lint.lint_text` on a
:class:`~devlint.lsp.document_lint.DocumentState` that only it touches while it lints.
Imports lsprotocol (installed with pygls)."""

from __future__ import annotations

import asyncio
import gc
import os
import threading
import time
from dataclasses import dataclass
from functools import partial
from typing import Sequence

from lsprotocol import types

from ..finding import Finding
from .diagnostics import diagnostic
from .document_lint import DocumentState, lint_text, notebook_findings
from .encoding import split_lines
from .settings import Settings
from .worker import Job, Linter

#: Seconds between a document's last change and its lint. 0: a change is linted at once when
#: no lint runs; changes that arrive during a lint coalesce into one lint of the newest text
#: (the stale lint stops at its next statement), so a burst of keystrokes costs at most one
#: lint after its last key.
DEBOUNCE = 0.0


@dataclass
class Published:
    """The findings last published for one document or cell URI, with the text they are of."""

    key: str
    text: str
    findings: list[Finding]


class Session:
    """The server's state between messages. ``server`` is the pygls server (its workspace
    holds the open texts); documents and notebooks are keyed by URI (a notebook by its own
    URI, its cells published by theirs). The open documents' states and generations and the
    event loop are read by both threads and guarded by one lock; :attr:`published` and the
    waiters are the protocol thread's only."""

    def __init__(self, server) -> None:
        self.server = server
        self.settings = Settings()
        self.debounce = DEBOUNCE
        #: by document or cell URI (protocol thread only)
        self.published: dict[str, Published] = {}
        self._waiters: dict[str, list[asyncio.Future]] = {}
        self._lock = threading.Lock()
        self._states: dict[str, DocumentState] = {}
        self._generations: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self.linter = Linter(self._run, self._done)
        from ..project import shared_index

        #: the project index (:mod:`devlint.project`): open buffers overlay the disk, and an
        #: edit of one lints again the open documents whose findings read it
        self.index = shared_index()

    # -- state shared by both threads --

    def start(self, loop: asyncio.AbstractEventLoop, options) -> None:
        """At ``initialize``: the event loop to hand results to, and the client's
        ``initializationOptions`` (``{"debounce": seconds}``, clamped to 0-5)."""
        with self._lock:
            self._loop = loop
        if isinstance(options, dict) and isinstance(options.get("debounce"), (int, float)):
            self.debounce = min(max(float(options["debounce"]), 0.0), 5.0)

    def _call_soon(self, callback, *args) -> None:
        with self._lock:
            loop = self._loop
        if loop is not None:
            loop.call_soon_threadsafe(callback, *args)

    def log(self, message: str, kind=types.MessageType.Warning) -> None:
        """Send ``message`` to the client's log (from any thread)."""
        self._call_soon(lambda: self.server.window_log_message(types.LogMessageParams(type=kind, message=message)))

    def is_open(self, key: str) -> bool:
        with self._lock:
            return key in self._states

    def open_keys(self) -> list[str]:
        with self._lock:
            return list(self._states)

    # -- the workspace --

    def encoding(self) -> str:
        """The position encoding negotiated with the client (``utf-16`` before that)."""
        server = self.server
        try:
            return str(getattr(server.workspace.position_encoding, "value", server.workspace.position_encoding) or "utf-16")
        except RuntimeError:
            return "utf-16"

    def opened(self, uri: str):
        """The open text document (or cell) at ``uri``, else ``None``."""
        from urllib.parse import unquote

        try:
            return self.server.workspace.text_documents.get(unquote(uri))
        except RuntimeError:  # not initialized
            return None

    def version_of(self, uri: str) -> int | None:
        return getattr(self.opened(uri), "version", None)

    def owner(self, uri: str) -> str:
        """The key a document or cell URI is linted under (a cell's: its notebook's)."""
        notebook = self.server.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None else uri

    @staticmethod
    def path_of(uri: str) -> str | None:
        from pygls.uris import to_fs_path

        try:
            return to_fs_path(uri) if uri.startswith("file:") else None
        except Exception:  # noqa: BLE001
            return None

    # -- scheduling (protocol thread) --

    def schedule(self, key: str, delay: float | None = None) -> None:
        """Queue a lint of document or notebook ``key``'s current text, ``delay`` seconds
        from now (default: :attr:`debounce`)."""
        delay = self.debounce if delay is None else delay
        notebook = self.server.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            docs = []
            for cell in notebook.cells:
                if cell.kind == types.NotebookCellKind.Code:
                    document = self.opened(cell.document)
                    if document is not None and (document.language_id or "python") == "python":
                        docs.append((cell.document, document.source))
            path = self.path_of(key)
        else:
            document = self.opened(key)
            if document is None:
                return
            docs, path = [(key, document.source)], document.path if key.startswith("file:") else None
        with self._lock:
            self._states.setdefault(key, DocumentState())
            generation = self._generations[key] = self._generations.get(key, 0) + 1
        self.linter.submit(Job(key, generation, docs, path, notebook is not None, time.monotonic() + delay))

    def forget(self, key: str, uris: Sequence[str]) -> None:
        """A closed document or notebook: drop its lint and state, clear its diagnostics."""
        self.linter.cancel(key)
        with self._lock:
            self._states.pop(key, None)
            self._generations[key] = self._generations.get(key, 0) + 1
        for uri in uris:
            self.unpublish(uri)

    def unpublish(self, uri: str) -> None:
        """Clear the diagnostics of ``uri`` (a closed document or cell)."""
        self.published.pop(uri, None)
        self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def reload_settings(self) -> None:
        """A ``pyproject.toml`` changed: read the settings again and lint every document."""
        self.settings.clear()
        for key in self.open_keys():
            self.schedule(key, 0)

    def stop(self) -> None:
        self.linter.stop()

    # -- running a job (lint thread) --

    def _run(self, job: Job):
        with self._lock:
            state = self._states.get(job.key)
        if state is None:  # closed meanwhile
            return None
        stale = partial(self.linter.superseded, job)
        if job.notebook:
            per_cell = notebook_findings([text for _, text in job.docs], job.path, state, self.settings, self.log, stale)
            result = [(uri, text, found) for (uri, text), found in zip(job.docs, per_cell)]
        else:
            uri, text = job.docs[0]
            if self.index is not None and job.path:
                self.index.overlay(job.path, text)
            result = [(uri, text, lint_text(text, job.path, state, self.settings, self.log, stale, self.index))]
        if state.cache.stats.full:
            # A new tree is kept for the next edits: move it out of the generations the
            # collector scans, or its next full pass (100+ ms for 2,000 lines) lands on a
            # keystroke. The trees hold no cycles: reference counting frees them when dropped.
            gc.freeze()
        return result

    def _done(self, job: Job, result, stale: bool) -> None:
        self._call_soon(self._finish, job, result, stale)

    def _finish(self, job: Job, result, stale: bool) -> None:
        """On the protocol thread: publish unless a newer change (or a close) came."""
        with self._lock:
            current = self._generations.get(job.key) == job.generation and job.key in self._states
        if result is not None and not stale and current:
            units = self.encoding()
            for uri, text, findings in result:
                self.published[uri] = Published(job.key, text, findings)
                lines = split_lines(text)
                self.server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                    uri=uri, diagnostics=[diagnostic(f, lines, units) for f in findings],
                    version=self.version_of(uri)))
        for future in self._waiters.pop(job.key, []):
            if not future.done():
                future.set_result(None)
        if result is not None and job.path and not job.notebook:
            self.relint_importers(job.path)

    def relint_importers(self, path: str) -> None:
        """Lint again the open documents whose last findings read ``path`` as it was before
        (protocol thread)."""
        if self.index is None:
            return
        path = os.path.abspath(path)
        now = self.index.digest(path)
        with self._lock:
            stale = [key for key, state in self._states.items() if state.deps.get(path, now) != now]
        for key in stale:
            self.schedule(key, 0)

    def files_changed(self, paths: Sequence[str | None]) -> None:
        """Python files changed on disk (the client's file watcher): lint again the open
        documents whose findings read one (a created or deleted file may change what an import
        names, so the import lookups are forgotten)."""
        if self.index is None or not paths:
            return
        from ..project import resolve

        resolve.clear()
        for path in paths:
            if path:
                self.relint_importers(path)

    def closed(self, path: str | None) -> None:
        """A document was closed: the disk speaks for its file again."""
        if self.index is not None and path:
            self.index.overlay(path, None)
            self.relint_importers(path)

    # -- requests (protocol thread) --

    async def current(self, uri: str) -> Published | None:
        """The findings of ``uri``'s current text, waiting (at most 30 s) for its lint."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            document = self.opened(uri)
            if document is None:
                return None
            entry = self.published.get(uri)
            if entry is not None and entry.text == document.source:
                return entry
            key = self.owner(uri)
            if not self.is_open(key):
                return None
            if not self.linter.pending(key):
                self.schedule(key, 0)
            future = asyncio.get_running_loop().create_future()
            self._waiters.setdefault(key, []).append(future)
            try:
                await asyncio.wait_for(future, timeout=max(deadline - time.monotonic(), 0.01))
            except asyncio.TimeoutError:
                return None
        return None
