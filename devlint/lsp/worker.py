"""The lint thread: one lint at a time, the job due first, and only the newest job of each
document (a newer change makes the running lint of that document stale)."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .document_lint import Cancelled

logger = logging.getLogger(__name__)


@dataclass
class Job:
    """A lint to run: ``key`` (a document or notebook URI), ``generation`` (increases with
    every change of that key; only the newest is ever published), ``docs`` the (URI, text)
    of the document or of each code cell, ``path`` the file, ``due`` (``time.monotonic``)."""

    key: str
    generation: int
    docs: list[tuple[str, str]]
    path: str | None
    notebook: bool
    due: float


class Linter:
    """One daemon thread that runs :class:`Job` s: the one due first, each key's newest only.

    ``run(job)`` lints (it may poll :meth:`superseded` and give up, raising
    :class:`Cancelled`); ``done(job, result, stale)`` is called (on the worker thread) after
    each lint, ``stale`` when a newer job for the same key arrived meanwhile (``result`` is
    ``None`` for a lint that gave up)."""

    def __init__(self, run: Callable[[Job], object], done: Callable[[Job, object, bool], None]) -> None:
        self._run, self._done = run, done
        self._jobs: dict[str, Job] = {}
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False

    def submit(self, job: Job) -> None:
        """Queue ``job``, replacing any queued job of its key."""
        with self._cond:
            self._jobs[job.key] = job
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="devlint-lint", daemon=True)
                self._thread.start()
            self._cond.notify()

    def cancel(self, key: str) -> None:
        """Forget the queued job of ``key`` (a closed document)."""
        with self._cond:
            self._jobs.pop(key, None)

    def pending(self, key: str) -> bool:
        with self._cond:
            return key in self._jobs

    def superseded(self, job: Job) -> bool:
        """Is ``job`` stale: a newer job of its key queued, or the worker stopping? (Cheap and
        lock-free: the lint polls it at every statement.)"""
        return self._stopped or job.key in self._jobs

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while True:
                    if self._stopped:
                        return
                    if self._jobs:
                        job = min(self._jobs.values(), key=lambda j: j.due)
                        wait = job.due - time.monotonic()
                        if wait <= 0:
                            del self._jobs[job.key]
                            break
                        self._cond.wait(wait)
                    else:
                        self._cond.wait()
            try:
                result = self._run(job)
            except Cancelled:
                result = None
            except Exception:  # noqa: BLE001 - the server outlives any one lint
                logger.exception("devlint: lint of %s failed", job.key)
                continue
            with self._cond:
                stale = job.key in self._jobs
            self._done(job, result, stale)
