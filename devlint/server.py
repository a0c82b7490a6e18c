"""``devlint server``: a language server (LSP 3.17 over stdio) for editors, built on pygls.

Diagnostics: every open Python file and every Python cell of an open notebook (LSP notebook
document sync; the code cells are linted as one program, as ``devlint check`` does, and each
cell gets its own diagnostics) is linted with the settings of its own ``pyproject.toml``
(``select``/``ignore``, ``exclude``/``extend-exclude``, ``per-file-ignores``; found per file and
read again when it changes) and ``# noqa``, exactly as ``devlint check`` lints it.

Never behind the typing: lints run on one worker thread, at most one at a time. A change
starts a lint at once when none runs (:data:`DEBOUNCE` is 0; ``initializationOptions:
{"debounce": seconds}`` waits that long after the last change instead); a change that arrives
while a lint runs makes that lint stale: it stops at its next statement (never published) and
the newest text is linted right after, so the latest text always wins. Requests (code actions,
hover) are answered on the protocol thread meanwhile. The event loop reads the client's pipe
itself (no reader thread) and the interpreter lock is handed over every
:data:`SWITCH_INTERVAL`, so a keystroke reaches the lint thread within a few milliseconds even
while a lint runs. Each document keeps a per-statement parse cache
(:mod:`devlint.incremental`), so an edit re-parses only the statements it touches, and the
rendered positions of unchanged statements with findings; as ``devlint check``, the ``ast``
pre-check (its ``ast`` parsed per statement too) spares the traversal of a text in which no
rule has a candidate node. A new tree is moved out of the collector's reach (``gc.freeze``),
and the collector is off during a lint, so no full collection pass lands on a keystroke.
While the text does not parse, the last good diagnostics of the lines that did not change
stay, with one ``DEV000`` at the syntax error.

Code actions: apply a finding's fix (an unsafe one is labelled so), ``source.fixAll.devlint``
(every safe fix in the file), and add ``# noqa: CODE`` (merged into an existing ``# noqa``, see
:func:`devlint.noqa.edit`). Diagnostics link to the rule's docs (``codeDescription.href``);
hover on a flagged range shows them. Positions are counted in the encoding negotiated with the
client (UTF-16 code units unless it offers another). Internal errors go to the client's log
(``window/logMessage``), never to a pop-up; a request whose params do not match the protocol
gets an ``InvalidParams`` error response. Requires ``pip install "devlint[server]"`` (pygls).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Callable, Sequence

from . import __version__, noqa, settings as torch_settings
from .config import Config, ConfigError, find as find_config, load as load_config
from .engine import PARSE_ERROR, _defuse, _syntax_error, enabled_rules, lint_module, triggered
from .finding import Finding
from .incremental import StatementCache, common_prefix, common_suffix
from .links import rule_docs_url
from .notebook import Notebook
from .precheck import candidates
from .rules import all_rules
from .runner import SKIP_DIRS, is_excluded

logger = logging.getLogger(__name__)

#: Seconds between a document's last change and its lint. 0: a change is linted at once when
#: no lint runs; changes that arrive during a lint coalesce into one lint of the newest text
#: (the stale lint stops at its next statement), so a burst of keystrokes costs at most one
#: lint after its last key.
DEBOUNCE = 0.0


#: Seconds a thread waiting for the interpreter lock waits before the running one must hand it
#: over (Python's default: 0.005). While a lint runs, each message from the editor waits that
#: long before the event loop may read it, and the lint waits as long for each answer: 1 ms
#: keeps a keystroke's way to the lint thread short at no measurable cost to the lint.
SWITCH_INTERVAL = 0.001


class Cancelled(BaseException):
    """Raised inside a lint whose text went stale (see ``lint_text(cancelled=...)``). A
    ``BaseException``, so that the engine's guard against internal errors (which turns any
    ``Exception`` into a ``DEV000``) lets it through."""


def _watcher(cancelled: Callable[[], bool]):
    """A participant of the engine's one traversal that raises :class:`Cancelled` at the
    first statement visited after ``cancelled()`` turns true. It reports nothing."""
    from .rule import Participant

    def check(self, node) -> None:
        if cancelled():
            raise Cancelled()

    names = ("SimpleStatementLine", "FunctionDef", "ClassDef", "If", "For", "While", "With", "Try", "TryStar", "Match")
    return type("StaleLintWatcher", (Participant,), {f"visit_{n}": check for n in names})


def rule_url(code: str) -> str | None:
    """The URL of the docs of rule ``code`` (see :func:`devlint.links.rule_docs_url`: the
    package's ``Documentation`` URL, else the source tree's ``docs/rules.md``), or ``None``
    (for ``DEV000`` too): a diagnostic links only to a page that exists."""
    return None if code == PARSE_ERROR else rule_docs_url(code, local=True)


# ---- settings: the file's own pyproject.toml --------------------------------------------

class Settings:
    """``[tool.devlint]`` per file, found as the CLI finds it (the nearest ``pyproject.toml``
    holding the table, from the file's folder upwards) and read again when any
    ``pyproject.toml`` on that way changes (checked with ``stat`` on every lint)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, Config, str | None]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _signature(folder: Path) -> tuple:
        found = []
        for parent in (folder, *folder.parents):
            try:
                stat = (parent / "pyproject.toml").stat()
            except OSError:
                continue
            found.append((str(parent), stat.st_mtime_ns, stat.st_size))
        return tuple(found)

    def for_path(self, path: str) -> tuple[Config, str | None]:
        """(the configuration of ``path``, an error message when its table was just read and
        is unreadable or invalid; the defaults are used then)."""
        folder = Path(os.path.abspath(path)).parent
        signature = self._signature(folder)
        with self._lock:
            cached = self._cache.get(str(folder))
        if cached is not None and cached[0] == signature:
            return cached[1], None  # an error is told once, when the file is read
        error = None
        try:
            found = find_config(folder)
            config = load_config(found) if found is not None else Config(root=folder)
        except (ConfigError, OSError) as exc:
            config, error = Config(root=folder), str(exc)
        with self._lock:
            self._cache[str(folder)] = (signature, config, error)
        return config, error

    def clear(self) -> None:
        """Forget every cached table (a watched ``pyproject.toml`` changed)."""
        with self._lock:
            self._cache.clear()


def excluded(path: str, config: Config) -> bool:
    """Does ``exclude``/``extend-exclude`` (or, without ``exclude``, the default folders such
    as ``.venv``) cover ``path``?"""
    patterns = [*(config.exclude if config.exclude is not None else sorted(SKIP_DIRS)), *config.extend_exclude]
    return is_excluded(path, patterns, config.root)


# ---- linting one document (no LSP here: the worker thread and the benchmark call it) ----

@dataclass
class DocumentState:
    """What a document keeps between lints: its statement cache and the last text that parsed
    with its findings (kept for the lines that do not change while the text does not parse)."""

    cache: StatementCache = field(default_factory=StatementCache)
    good_text: str | None = None
    good_findings: list[Finding] = field(default_factory=list)
    #: rendered positions of top-level statements with findings (``lint_module(positions=)``)
    positions: dict = field(default_factory=dict)
    #: whether the next lint runs the ``ast`` pre-check: on a new text (the first lint, a full
    #: parse), then for as long as it left no rule to run (it spared the parse's traversal);
    #: once a rule is a candidate the traversal runs anyway and the pre-check would only add
    #: its cost. The findings are the same either way (the pre-check is exact).
    precheck: bool = True
    #: what a lint of a text that does not parse publishes (set by :func:`lint_text`)
    broken: list[Finding] = field(default_factory=list)


def _clean(text: str) -> str:
    """``text`` with lone surrogates (which no parser takes) replaced by U+FFFD: the same
    length in code points and in UTF-16 code units, so every position stays put."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= ch <= "\udfff" else ch for ch in text)
    return text


def carried(old_text: str, findings: Sequence[Finding], new_text: str) -> list[Finding]:
    """``findings`` of ``old_text`` that lie on lines ``new_text`` did not change, moved to
    their new lines (lines before the first changed line stay, lines after the last one
    shift by the number of lines added or removed)."""
    old, new = old_text.split("\n"), new_text.split("\n")
    top = 0
    limit = min(len(old), len(new))
    while top < limit and old[top] == new[top]:
        top += 1
    bottom = 0
    while bottom < limit - top and old[-1 - bottom] == new[-1 - bottom]:
        bottom += 1
    shift = len(new) - len(old)
    kept = []
    for finding in findings:
        end = finding.end_line or finding.line
        if end <= top:
            kept.append(finding)
        elif finding.line > len(old) - bottom:
            kept.append(_moved(finding, shift))
    return kept


def _moved(finding: Finding, shift: int) -> Finding:
    fix = finding.fix
    if fix is not None:
        fix = replace(fix, edits=tuple(replace(e, line=e.line + shift, end_line=e.end_line + shift) for e in fix.edits))
    return replace(finding, line=finding.line + shift, end_line=(finding.end_line + shift) if finding.end_line else 0, fix=fix)


def lint_text(text: str, path: str | None, state: DocumentState, settings: Settings | None = None,
              log: Callable[[str], None] = logger.warning,
              cancelled: Callable[[], bool] | None = None) -> list[Finding]:
    """Findings of one editor buffer, as ``devlint check`` reports them for that file (its
    settings, ``# noqa``), re-using ``state``'s parse of unchanged statements.

    As ``devlint check``, the rules that pass the text pre-screen are narrowed by the ``ast``
    pre-check (:func:`devlint.precheck.candidates`, on :meth:`StatementCache.precheck_facts`:
    only the changed statements are parsed and walked for it) and a text with no candidate rule is not
    traversed; the pre-check runs while it pays (:meth:`DocumentState.wants_precheck`), the
    findings being the same either way. The collector is off for the whole lint.

    When ``text`` does not parse: the previous good findings on unchanged lines plus one
    ``DEV000`` at the syntax error. Never raises on any text, except :class:`Cancelled` when
    ``cancelled()`` (polled before and after the parse and at every statement of the
    traversal) turns true; ``state`` stays usable then."""
    name = path or "<buffer>"
    select, ignore, dropped = ["DEV"], [], ()
    if path and settings is not None:
        config, error = settings.for_path(path)
        if error:
            log(f"devlint: {error}; using the default settings")
        if excluded(path, config):
            return []
        select, ignore = config.selection(None, (), ())
        dropped = tuple(config.ignored_codes(path))
        torch_settings.set_torch_version(config.torch_version)  # fixes and messages read it
    rules = triggered(text, enabled_rules(select, ignore))
    clean = _clean(text)
    if not rules:
        state.good_text, state.good_findings = clean, []
        return []
    if cancelled is not None and cancelled():
        raise Cancelled()
    body, skipped = _defuse(clean, name)
    collecting = gc.isenabled()
    gc.disable()  # a full pass of the collector over a large tree costs more than the lint
    try:
        findings = _lint_body(body, clean, name, rules, state, cancelled)
    finally:
        if collecting:
            gc.enable()
    if findings is None:  # a syntax error: DEV000, the good findings of unchanged lines kept
        return state.broken
    findings = noqa.apply(sorted([*skipped, *findings]), clean)
    if dropped:
        findings = [f for f in findings if not f.code.startswith(dropped)]
    state.good_text, state.good_findings = clean, findings
    return findings


def _lint_body(body: str, clean: str, name: str, rules: list, state: DocumentState,
               cancelled: Callable[[], bool] | None) -> list[Finding] | None:
    """The findings of the candidate ``rules`` in ``body`` before ``# noqa`` (see
    :func:`lint_text`); ``None`` when ``body`` does not parse (``state.broken`` then holds
    what to publish)."""
    try:
        module = state.cache.parse(body)
    except Exception as exc:  # noqa: BLE001 - ParserSyntaxError, or the native parser's own
        import libcst as cst

        if not candidates(body, rules)[0]:
            return []  # as devlint check: no candidate rule (CPython parses it), libcst is not asked
        if isinstance(exc, cst.ParserSyntaxError):
            line, col, reason = _syntax_error(body, exc)
            error = Finding(name, line, col, PARSE_ERROR, f"could not parse: {reason}, line {line}", line, col)
        else:
            error = Finding(name, 1, 0, PARSE_ERROR, f"could not parse: {type(exc).__name__}: {exc}", 1, 0)
        kept = carried(state.good_text, state.good_findings, clean) if state.good_text is not None else []
        state.broken = sorted([*(f for f in kept if f.code != PARSE_ERROR), error])
        return None
    if state.cache.stats.full:
        state.precheck = True  # a new text: see whether the pre-check pays on it
    if state.precheck:
        if cancelled is not None and cancelled():
            raise Cancelled()
        facts = state.cache.precheck_facts()
        if cancelled is not None and cancelled():
            raise Cancelled()
        rules, _ = candidates(body, rules, facts=facts)
        state.precheck = not rules  # it pays while it spares the whole traversal
        if not rules:
            return []
    if cancelled is not None:
        if cancelled():
            raise Cancelled()
        rules = [*rules, _watcher(cancelled)]
    findings = lint_module(module, body, name, rules=rules, tree=state.cache.ast_stand_in(), positions=state.positions)
    if state.positions:
        alive = {id(statement) for statement in module.body}
        for key in [k for k in state.positions if k not in alive]:
            del state.positions[key]
    return findings


def lint_document(source: str, path: str | None) -> list[Finding]:
    """Findings for an editor buffer with a fresh cache (what one lint of ``source`` gives)."""
    return lint_text(source, path, DocumentState(), Settings())


def notebook_findings(cells: Sequence[str], path: str | None, state: DocumentState,
                      settings: Settings | None = None, log: Callable[[str], None] = logger.warning,
                      cancelled: Callable[[], bool] | None = None) -> list[list[Finding]]:
    """Findings of each code cell of a notebook (cell-relative lines; a fix whose edits span
    cells is dropped), the cells linted as one program (:meth:`devlint.notebook.Notebook.program`)."""
    text, where = Notebook(tuple(cells)).program()
    per_cell: list[list[Finding]] = [[] for _ in cells]
    if not where:
        return per_cell
    for finding in lint_text(text, path, state, settings, log, cancelled):
        line = min(max(finding.line, 1), len(where))
        cell, row = where[line - 1]
        end_cell, end_row = where[min(max(finding.end_line or line, 1), len(where)) - 1]
        end_column = finding.end_column if end_cell == cell else finding.column
        if end_cell != cell:
            end_row = row
        fix = finding.fix
        if fix is not None:
            edits = []
            for e in fix.edits:
                (a, a_row), (b, b_row) = where[e.line - 1], where[e.end_line - 1]
                if a != cell or b != cell:
                    fix = None
                    break
                edits.append(replace(e, line=a_row, end_line=b_row))
            else:
                fix = replace(fix, edits=tuple(edits))
        per_cell[cell - 1].append(replace(finding, line=row, end_line=end_row, end_column=end_column, fix=fix, cell=cell))
    return per_cell


# ---- positions: code points <-> the client's units ---------------------------------------

def split_lines(text: str) -> list[str]:
    """The lines of ``text`` without their endings (``\\n``, ``\\r\\n`` or ``\\r``, as LSP counts)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n")


def to_units(line: str, column: int, encoding: str = "utf-16") -> int:
    """Code-point ``column`` of ``line`` in the client's units (a lone surrogate is one unit)."""
    head = line[:column]
    if encoding == "utf-32":
        return len(head)
    if encoding == "utf-8":
        return len(head.encode("utf-8", "surrogatepass"))
    return len(head.encode("utf-16-le", "surrogatepass")) // 2


def from_units(line: str, units: int, encoding: str = "utf-16") -> int:
    """The code-point column of ``line`` at ``units`` client units (clamped to the line)."""
    if encoding == "utf-32":
        return min(max(units, 0), len(line))
    count = 0
    for index, ch in enumerate(line):
        if count >= units:
            return index
        point = ord(ch)
        if encoding == "utf-8":
            count += 1 if point < 0x80 else 2 if point < 0x800 else 3 if point < 0x10000 else 4
        else:
            count += 2 if point >= 0x10000 else 1
    return len(line)


# ---- the worker: one lint at a time, the latest text wins ---------------------------------

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


# ---- the language server ------------------------------------------------------------------

@dataclass
class Published:
    """The findings last published for one document or cell URI, with the text they are of."""

    key: str
    text: str
    findings: list[Finding]


def build_server():
    """The pygls ``LanguageServer`` with devlint's features registered.

    Raises ``ImportError`` when pygls is not installed."""
    from lsprotocol import types
    from pygls.exceptions import JsonRpcInvalidParams
    from pygls.lsp.server import LanguageServer
    from pygls.protocol import LanguageServerProtocol
    from pygls.protocol.json_rpc import JsonRPCNotification
    from pygls.protocol.language_server import lsp_method
    from pygls.uris import to_fs_path

    class Protocol(LanguageServerProtocol):
        """pygls' protocol, answering malformed requests and ignoring changes to documents
        that were never opened (instead of failing with a pop-up)."""

        def structure_message(self, data):
            try:
                return super().structure_message(data)
            except Exception as exc:  # noqa: BLE001 - JsonRpcInvalidParams / JsonRpcInternalError
                if isinstance(data, dict) and "id" in data and "method" in data:
                    error = JsonRpcInvalidParams(f"invalid params for {data.get('method')}: {exc.__cause__ or exc}")
                    self._send_response(data["id"], error=error.to_response_error())
                logger.warning("devlint: dropped a malformed message (%s)", data.get("method") if isinstance(data, dict) else "?")
                return JsonRPCNotification(method="$/devlint/malformed", jsonrpc="2.0", params=None)

        def _known(self, uri: str) -> bool:
            from urllib.parse import unquote

            return unquote(uri) in self.workspace.text_documents

        @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
        def lsp_text_document__did_change(self, params):
            if not self._known(params.text_document.uri):
                logger.warning("devlint: change to a document that is not open: %s", params.text_document.uri)
                return
            yield from super().lsp_text_document__did_change(params)

        @lsp_method(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
        def lsp_notebook_document__did_change(self, params):
            if self.workspace.get_notebook_document(notebook_uri=params.notebook_document.uri) is None:
                logger.warning("devlint: change to a notebook that is not open: %s", params.notebook_document.uri)
                return
            yield from super().lsp_notebook_document__did_change(params)

    class Server(LanguageServer):
        def report_server_error(self, error, source):
            """Errors go to the client's log, never to a pop-up."""
            try:
                self.window_log_message(types.LogMessageParams(type=types.MessageType.Error,
                                                               message=f"devlint: internal error: {error!r}"))
            except Exception:  # noqa: BLE001
                logger.exception("devlint: could not report %r", error)

        def start_io(self, stdin=None, stdout=None):
            """Serve over stdio, reading the client's messages on the event loop itself.

            pygls reads stdin on a worker thread, one ``readline``/``read`` per header line and
            body, each a hand-off of the interpreter lock between that thread, the event loop
            and the lint thread: with a lint running, a keystroke waited 5 ms per hand-off
            (``sys.getswitchinterval()``), ~45 ms a message, so a burst of keys 30 ms apart fell
            further and further behind (the last one was read 120-350 ms late). Here the loop
            reads the pipe when it is readable (``connect_read_pipe``): one hand-off for all
            the bytes that arrived. Where stdin is not a pipe or socket (a terminal, a file)
            or not on POSIX, pygls' own reader is used."""
            from pygls.io_ import StdinAsyncReader, StdoutWriter, run_async

            stream = stdin or sys.stdin.buffer
            self._stop_event = threading.Event()
            self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))

            async def serve() -> None:
                source = None
                if _is_pipe(stream) and os.name == "posix":
                    reader = asyncio.StreamReader(limit=1 << 20)
                    try:
                        await asyncio.get_running_loop().connect_read_pipe(
                            lambda: asyncio.StreamReaderProtocol(reader), stream)
                        source = _PipeReader(reader)
                    except (ValueError, OSError, NotImplementedError):
                        source = None
                if source is None:
                    source = StdinAsyncReader(stream, self.thread_pool)
                await run_async(stop_event=self._stop_event, reader=source, protocol=self.protocol,
                                logger=logger, error_handler=self.report_server_error)

            try:
                asyncio.run(serve())
            except BrokenPipeError:
                logger.error("devlint: the client closed the connection")
            except (KeyboardInterrupt, SystemExit):
                pass
            finally:
                self.shutdown()

    server = Server(
        "devlint", __version__, protocol_cls=Protocol,
        text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        notebook_document_sync=types.NotebookDocumentSyncOptions(notebook_selector=[
            types.NotebookDocumentFilterWithCells(notebook="*", cells=[types.NotebookCellLanguage(language="python")]),
        ]),
    )
    settings = Settings()
    states: dict[str, DocumentState] = {}
    generations: dict[str, int] = {}
    published: dict[str, Published] = {}  # by document or cell URI
    waiters: dict[str, list[asyncio.Future]] = {}
    loop_holder: list[asyncio.AbstractEventLoop] = []
    debounce = [DEBOUNCE]

    def log(message: str, kind=types.MessageType.Warning) -> None:
        if loop_holder:
            loop_holder[0].call_soon_threadsafe(
                lambda: server.window_log_message(types.LogMessageParams(type=kind, message=message)))

    def encoding() -> str:
        try:
            return str(getattr(server.workspace.position_encoding, "value", server.workspace.position_encoding) or "utf-16")
        except RuntimeError:
            return "utf-16"

    # -- running a job (worker thread) --

    def run(job: Job):
        state = states.get(job.key)
        if state is None:  # closed meanwhile
            return None
        stale = partial(linter.superseded, job)
        if job.notebook:
            per_cell = notebook_findings([text for _, text in job.docs], job.path, state, settings, log, stale)
            result = [(uri, text, found) for (uri, text), found in zip(job.docs, per_cell)]
        else:
            uri, text = job.docs[0]
            result = [(uri, text, lint_text(text, job.path, state, settings, log, stale))]
        if state.cache.stats.full:
            # A new tree is kept for the next edits: move it out of the generations the
            # collector scans, or its next full pass (100+ ms for 2,000 lines) lands on a
            # keystroke. The trees hold no cycles: reference counting frees them when dropped.
            gc.freeze()
        return result

    def done(job: Job, result, stale: bool) -> None:
        if loop_holder:
            loop_holder[0].call_soon_threadsafe(finish, job, result, stale)

    def finish(job: Job, result, stale: bool) -> None:
        """On the protocol thread: publish unless a newer change (or a close) came."""
        if result is not None and not stale and generations.get(job.key) == job.generation and job.key in states:
            for uri, text, findings in result:
                published[uri] = Published(job.key, text, findings)
                lines = split_lines(text)
                server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                    uri=uri, diagnostics=[diagnostic(f, lines) for f in findings],
                    version=version_of(uri)))
        for future in waiters.pop(job.key, []):
            if not future.done():
                future.set_result(None)

    linter = Linter(run, done)

    def opened(uri: str):
        """The open text document (or cell) at ``uri``, else ``None``."""
        from urllib.parse import unquote

        try:
            return server.workspace.text_documents.get(unquote(uri))
        except RuntimeError:  # not initialized
            return None

    def version_of(uri: str) -> int | None:
        return getattr(opened(uri), "version", None)

    def diagnostic(finding: Finding, lines: list[str]) -> types.Diagnostic:
        start_line = lines[finding.line - 1] if 0 < finding.line <= len(lines) else ""
        end_row = finding.end_line or finding.line
        end_text = lines[end_row - 1] if 0 < end_row <= len(lines) else start_line
        end_column = finding.end_column if finding.end_line else finding.column + 1
        if (end_row, end_column) <= (finding.line, finding.column):  # DEV000: the whole rest of the line
            end_row, end_text, end_column = finding.line, start_line, max(len(start_line), finding.column + 1)
        units = encoding()
        return types.Diagnostic(
            range=types.Range(
                start=types.Position(line=max(finding.line - 1, 0), character=to_units(start_line, finding.column, units)),
                end=types.Position(line=max(end_row - 1, 0), character=to_units(end_text, end_column, units)),
            ),
            message=finding.message,
            severity=types.DiagnosticSeverity.Error if finding.code == PARSE_ERROR else types.DiagnosticSeverity.Warning,
            code=finding.code,
            code_description=(types.CodeDescription(href=url) if (url := rule_url(finding.code)) else None),
            source="devlint",
        )

    # -- scheduling (protocol thread) --

    def path_of(uri: str) -> str | None:
        try:
            return to_fs_path(uri) if uri.startswith("file:") else None
        except Exception:  # noqa: BLE001
            return None

    def schedule(key: str, delay: float | None = None) -> None:
        delay = debounce[0] if delay is None else delay
        notebook = server.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            docs = []
            for cell in notebook.cells:
                if cell.kind == types.NotebookCellKind.Code:
                    document = opened(cell.document)
                    if document is not None and (document.language_id or "python") == "python":
                        docs.append((cell.document, document.source))
            path = path_of(key)
        else:
            document = opened(key)
            if document is None:
                return
            docs, path = [(key, document.source)], document.path if key.startswith("file:") else None
        states.setdefault(key, DocumentState())
        generations[key] = generations.get(key, 0) + 1
        linter.submit(Job(key, generations[key], docs, path, notebook is not None, time.monotonic() + delay))

    def forget(key: str, uris: Sequence[str]) -> None:
        linter.cancel(key)
        states.pop(key, None)
        generations[key] = generations.get(key, 0) + 1
        for uri in uris:
            published.pop(uri, None)
            server.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    def owner(uri: str) -> str:
        notebook = server.workspace.get_notebook_document(cell_uri=uri)
        return notebook.uri if notebook is not None else uri

    @server.feature(types.INITIALIZE)
    def initialize(ls, params: types.InitializeParams) -> None:
        loop_holder[:] = [asyncio.get_running_loop()]
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("debounce"), (int, float)):
            debounce[0] = min(max(float(options["debounce"]), 0.0), 5.0)

    @server.feature(types.INITIALIZED)
    def initialized(ls, params) -> None:
        watched = getattr(getattr(getattr(ls.client_capabilities, "workspace", None), "did_change_watched_files", None),
                          "dynamic_registration", False)
        if watched:
            ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
                id="devlint-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml")]),
            )]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.endswith("pyproject.toml") for change in params.changes):
            settings.clear()
            for key in list(states):
                schedule(key, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: types.DidOpenTextDocumentParams) -> None:
        if params.text_document.uri.endswith("pyproject.toml"):
            return
        if server.workspace.get_notebook_document(cell_uri=params.text_document.uri) is None:
            schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: types.DidChangeTextDocumentParams) -> None:
        schedule(owner(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params: types.DidSaveTextDocumentParams) -> None:
        if params.text_document.uri.endswith("pyproject.toml"):
            settings.clear()
            for key in list(states):
                schedule(key, 0)
        elif owner(params.text_document.uri) in states:
            schedule(owner(params.text_document.uri), 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: types.DidCloseTextDocumentParams) -> None:
        if params.text_document.uri in states:
            forget(params.text_document.uri, [params.text_document.uri])

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls, params: types.DidOpenNotebookDocumentParams) -> None:
        schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls, params: types.DidChangeNotebookDocumentParams) -> None:
        structure = params.change.cells.structure if params.change.cells else None
        for cell in (structure.did_close or []) if structure else []:
            published.pop(cell.uri, None)
            ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))
        schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls, params: types.DidSaveNotebookDocumentParams) -> None:
        schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls, params: types.DidCloseNotebookDocumentParams) -> None:
        forget(params.notebook_document.uri, [c.uri for c in params.cell_text_documents])

    @server.feature(types.SHUTDOWN)
    def shutdown(ls, *args) -> None:
        linter.stop()

    # -- requests --

    async def current(uri: str) -> Published | None:
        """The findings of ``uri``'s current text, waiting (at most 30 s) for its lint."""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            document = opened(uri)
            if document is None:
                return None
            entry = published.get(uri)
            if entry is not None and entry.text == document.source:
                return entry
            key = owner(uri)
            if key not in states:
                return None
            if not linter.pending(key):
                schedule(key, 0)
            future = asyncio.get_running_loop().create_future()
            waiters.setdefault(key, []).append(future)
            try:
                await asyncio.wait_for(future, timeout=max(deadline - time.monotonic(), 0.01))
            except asyncio.TimeoutError:
                return None
        return None

    def text_edit(lines: list[str], line: int, column: int, end_line: int, end_column: int, text: str) -> types.TextEdit:
        units = encoding()

        def position(row: int, col: int) -> types.Position:
            if row > len(lines):
                return types.Position(line=len(lines), character=0)
            return types.Position(line=row - 1, character=to_units(lines[row - 1], col, units))

        return types.TextEdit(range=types.Range(start=position(line, column), end=position(end_line, end_column)), new_text=text)

    def overlaps(finding: Finding, range_: types.Range) -> bool:
        start = finding.line - 1
        end = (finding.end_line or finding.line) - 1
        return start <= range_.end.line and range_.start.line <= end

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, "source.fixAll.devlint"],
                                resolve_provider=False),
    )
    async def code_action(ls, params: types.CodeActionParams):
        uri = params.text_document.uri
        entry = await current(uri)
        if entry is None:
            return []
        only = params.context.only

        def allowed(kind: str) -> bool:
            return only is None or any(kind == k or kind.startswith(f"{k}.") for k in only)

        lines = split_lines(entry.text)
        sent = {(d.code, d.range.start.line, d.range.start.character): d for d in params.context.diagnostics
                if d.source == "devlint"}
        actions = []
        for finding in entry.findings:
            if finding.code == PARSE_ERROR or not overlaps(finding, params.range):
                continue
            made = diagnostic(finding, lines)
            made = sent.get((made.code, made.range.start.line, made.range.start.character), made)
            if finding.fix is not None and finding.fix.edits and allowed(types.CodeActionKind.QuickFix):
                fix = finding.fix
                title = f"{finding.code}: {fix.description}" + ("" if fix.safe else " (unsafe fix)")
                actions.append(types.CodeAction(
                    title=title, kind=types.CodeActionKind.QuickFix, diagnostics=[made], is_preferred=fix.safe,
                    edit=types.WorkspaceEdit(changes={uri: [text_edit(lines, e.line, e.column, e.end_line, e.end_column, e.text)
                                                            for e in fix.edits]}),
                ))
            if allowed(types.CodeActionKind.QuickFix):
                change = noqa.edit(entry.text, finding.line, [finding.code])
                if change is not None:
                    row, new_line = change
                    body = new_line.rstrip("\r\n")
                    actions.append(types.CodeAction(
                        title=f"Disable {finding.code} for this line", kind=types.CodeActionKind.QuickFix,
                        diagnostics=[made],
                        edit=types.WorkspaceEdit(changes={uri: [text_edit(lines, row, 0, row, len(lines[row - 1]), body)]}),
                    ))
        if allowed("source.fixAll.devlint"):
            edit = fix_all_edit(entry, lines)
            if edit is not None:
                actions.append(types.CodeAction(title="Fix all devlint findings (safe fixes)", kind="source.fixAll.devlint",
                                                edit=types.WorkspaceEdit(changes={uri: [edit]})))
        return actions

    def fix_all_edit(entry: Published, lines: list[str]) -> types.TextEdit | None:
        from .fix import apply

        fixed, count = apply(entry.text, entry.findings)
        if not count or fixed == entry.text:
            return None
        start = common_prefix(entry.text, fixed)
        if 0 < start < len(entry.text) and entry.text[start - 1] == "\r" and entry.text[start] == "\n":
            start -= 1  # never split a \r\n
        tail = common_suffix(entry.text, fixed, min(len(entry.text), len(fixed)) - start)
        end = len(entry.text) - tail
        if 0 < end < len(entry.text) and entry.text[end - 1] == "\r" and entry.text[end] == "\n":
            end += 1
            tail -= 1
        (row, column), (end_row, end_column) = line_column(entry.text, start), line_column(entry.text, end)
        return text_edit(lines, row, column, end_row, end_column, fixed[start:len(fixed) - tail])

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def hover(ls, params: types.HoverParams):
        entry = published.get(params.text_document.uri)
        document = opened(params.text_document.uri)
        if entry is None or document is None:
            return None
        lines = split_lines(entry.text)
        row = params.position.line + 1
        if not 0 < row <= len(lines):
            return None
        column = from_units(lines[row - 1], params.position.character, encoding())
        docs = {r.code: r for r in all_rules()}
        parts = []
        for finding in entry.findings:
            end = (finding.end_line or finding.line, finding.end_column if finding.end_line else finding.column + 1)
            if (finding.line, finding.column) <= (row, column) <= end and finding.code in docs:
                text = docs[finding.code].docs()
                if text not in parts:
                    parts.append(text)
        if not parts:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value="\n---\n".join(parts)))

    return server


def _is_pipe(stream) -> bool:
    """Is ``stream`` a pipe or socket (never a terminal, whose mode the loop would change)?"""
    import stat

    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _PipeReader:
    """pygls' reader interface (``readline``, ``readexactly``) over an ``asyncio.StreamReader``;
    end of input reads as ``b""``, as pygls expects."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        try:
            return await self._reader.readline()
        except ValueError:  # a header line longer than the limit: not LSP, give up
            return b""

    async def readexactly(self, n: int) -> bytes:
        try:
            return await self._reader.readexactly(n)
        except asyncio.IncompleteReadError:
            return b""


def line_column(text: str, offset: int) -> tuple[int, int]:
    """(1-based line, code-point column) of ``offset`` in ``text``, lines as LSP counts them."""
    head = split_lines(text[:offset])
    return len(head), len(head[-1])


def main() -> int:
    """Serve over stdio until the editor exits; 2 when pygls is missing."""
    try:
        server = build_server()
    except ImportError:
        print('devlint: error: the language server needs pygls: pip install "devlint[server]"', file=sys.stderr)
        return 2
    sys.setswitchinterval(SWITCH_INTERVAL)
    server.start_io()
    return 0
