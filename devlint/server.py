"""``devlint server``: a language server (LSP over stdio) for editors, built on pygls.

It lints a document when it is opened, changed or saved and publishes the findings as
diagnostics (warnings, source ``devlint``, code ``DEVnnn``), honouring ``# noqa`` and
``[tool.devlint]`` exactly as ``devlint check`` does. ``DEV000`` (cannot parse) is left to the
editor's own syntax checking, since half-typed code does not parse. A code action adds
``# noqa: CODE`` to a flagged line. Requires ``pip install "devlint[server]"`` (pygls).
"""

from __future__ import annotations

from . import __version__, noqa
from .config import ConfigError, resolve as resolve_config
from .engine import PARSE_ERROR
from .finding import Finding
from .runner import check_source


def lint_document(source: str, path: str | None) -> list[Finding]:
    """Findings for an editor buffer: the CLI's selection, per-file ignores and ``# noqa``."""
    select, ignore, config = ["DEV"], [], None
    if path:
        try:
            config = resolve_config([path])
            select, ignore = config.selection(None, (), ())
        except (ConfigError, OSError):
            config = None
    findings = check_source(source.encode("utf-8"), path or "<buffer>", select, ignore)
    findings = [f for f in findings if f.code != PARSE_ERROR]
    if config is not None and config.per_file_ignores and path:
        dropped = tuple(config.ignored_codes(path))
        findings = [f for f in findings if not (dropped and f.code.startswith(dropped))]
    return findings


def _utf16(line: str, column: int) -> int:
    """LSP positions count UTF-16 code units; libcst counts code points."""
    return len(line[:column].encode("utf-16-le")) // 2


def build_server():
    """The pygls ``LanguageServer`` with devlint's features registered.

    Raises ``ImportError`` when pygls is not installed."""
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

    server = LanguageServer("devlint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Full)

    def publish(ls, uri: str) -> None:
        document = ls.workspace.get_text_document(uri)
        lines = document.source.splitlines()
        diagnostics = []
        for f in lint_document(document.source, document.path):
            start_line = lines[f.line - 1] if 0 < f.line <= len(lines) else ""
            end_line = lines[f.end_line - 1] if 0 < f.end_line <= len(lines) else start_line
            end = (f.end_line, f.end_column) if f.end_line else (f.line, f.column + 1)
            diagnostics.append(types.Diagnostic(
                range=types.Range(
                    start=types.Position(line=f.line - 1, character=_utf16(start_line, f.column)),
                    end=types.Position(line=end[0] - 1, character=_utf16(end_line, end[1])),
                ),
                message=f.message,
                severity=types.DiagnosticSeverity.Warning,
                code=f.code,
                source="devlint",
            ))
        ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=diagnostics)
        )

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls, params: types.DidOpenTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls, params: types.DidChangeTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls, params: types.DidSaveTextDocumentParams) -> None:
        publish(ls, params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls, params: types.DidCloseTextDocumentParams) -> None:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=params.text_document.uri, diagnostics=[]))

    @server.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix]),
    )
    def code_action(ls, params: types.CodeActionParams):
        document = ls.workspace.get_text_document(params.text_document.uri)
        lines = document.source.splitlines()
        actions = []
        for diagnostic in params.context.diagnostics:
            if diagnostic.source != "devlint" or not 0 <= diagnostic.range.start.line < len(lines):
                continue
            change = noqa.edit(document.source, diagnostic.range.start.line + 1, [str(diagnostic.code)])
            if change is None:
                continue
            row, new_text = change[0] - 1, change[1].rstrip("\r\n")
            edit = types.TextEdit(
                range=types.Range(start=types.Position(line=row, character=0),
                                  end=types.Position(line=row, character=_utf16(lines[row], len(lines[row])))),
                new_text=new_text,
            )
            actions.append(types.CodeAction(
                title=f"Disable {diagnostic.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diagnostic],
                edit=types.WorkspaceEdit(changes={params.text_document.uri: [edit]}),
            ))
        return actions

    return server


def main() -> int:
    """Serve over stdio until the editor exits; 2 when pygls is missing."""
    try:
        server = build_server()
    except ImportError:
        import sys

        print('devlint: error: the language server needs pygls: pip install "devlint[server]"', file=sys.stderr)
        return 2
    server.start_io()
    return 0
