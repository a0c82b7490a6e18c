"""The language server: devlint's features registered on the pygls server, each handed to the
module of its concern (:mod:`~devlint.lsp.session` for the document lifecycle,
:mod:`~devlint.lsp.code_actions`, :mod:`~devlint.lsp.hover`), and ``main``, which serves over
stdio. Only :func:`build_server` imports pygls."""

from __future__ import annotations

import asyncio
import sys

#: Seconds a thread waiting for the interpreter lock waits before the running one must hand it
#: over (Python's default: 0.005). While a lint runs, each message from the editor waits that
#: long before the event loop may read it, and the lint waits as long for each answer: 1 ms
#: keeps a keystroke's way to the lint thread short at no measurable cost to the lint.
SWITCH_INTERVAL = 0.001


def build_server():
    """The pygls ``LanguageServer`` with devlint's features registered.

    Raises ``ImportError`` when pygls is not installed."""
    from lsprotocol import types

    from .. import __version__
    from .code_actions import KINDS, code_actions
    from .hover import hover
    from .session import Session
    from .transport import Protocol, Server

    server = Server(
        "devlint", __version__, protocol_cls=Protocol,
        text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        notebook_document_sync=types.NotebookDocumentSyncOptions(notebook_selector=[
            types.NotebookDocumentFilterWithCells(notebook="*", cells=[types.NotebookCellLanguage(language="python")]),
        ]),
    )
    session = Session(server)

    @server.feature(types.INITIALIZE)
    def initialize(ls, params: types.InitializeParams) -> None:
        session.start(asyncio.get_running_loop(), params.initialization_options)

    @server.feature(types.INITIALIZED)
    def initialized(ls, params) -> None:
        watched = getattr(getattr(getattr(ls.client_capabilities, "workspace", None), "did_change_watched_files", None),
                          "dynamic_registration", False)
        if watched:
            ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
                id="devlint-pyproject", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                register_options=types.DidChangeWatchedFilesRegistrationOptions(
                    watchers=[types.FileSystemWatcher(glob_pattern="**/pyproject.toml"),
                              types.FileSystemWatcher(glob_pattern="**/*.py")]),
            )]))

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched_files(ls, params: types.DidChangeWatchedFilesParams) -> None:
        if any(change.uri.endswith("pyproject.toml") for change in params.changes):
            session.reload_settings()
        session.files_changed([session.path_of(c.uri) for c in params.changes if c.uri.endswith(".py")])

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: types.DidOpenTextDocumentParams) -> None:
        if params.text_document.uri.endswith("pyproject.toml"):
            return
        if server.workspace.get_notebook_document(cell_uri=params.text_document.uri) is None:
            session.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: types.DidChangeTextDocumentParams) -> None:
        session.schedule(session.owner(params.text_document.uri))

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params: types.DidSaveTextDocumentParams) -> None:
        if params.text_document.uri.endswith("pyproject.toml"):
            session.reload_settings()
        elif session.is_open(session.owner(params.text_document.uri)):
            session.schedule(session.owner(params.text_document.uri), 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: types.DidCloseTextDocumentParams) -> None:
        if session.is_open(params.text_document.uri):
            session.forget(params.text_document.uri, [params.text_document.uri])
        session.closed(session.path_of(params.text_document.uri))

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls, params: types.DidOpenNotebookDocumentParams) -> None:
        session.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls, params: types.DidChangeNotebookDocumentParams) -> None:
        structure = params.change.cells.structure if params.change.cells else None
        for cell in (structure.did_close or []) if structure else []:
            session.unpublish(cell.uri)
        session.schedule(params.notebook_document.uri)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls, params: types.DidSaveNotebookDocumentParams) -> None:
        session.schedule(params.notebook_document.uri, 0)

    @server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls, params: types.DidCloseNotebookDocumentParams) -> None:
        session.forget(params.notebook_document.uri, [c.uri for c in params.cell_text_documents])

    @server.feature(types.SHUTDOWN)
    def shutdown(ls, *args) -> None:
        session.stop()

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(code_action_kinds=KINDS, resolve_provider=False))
    async def code_action(ls, params: types.CodeActionParams):
        return await code_actions(session, params)

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    def on_hover(ls, params: types.HoverParams):
        return hover(session, params)

    return server


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
