"""The wire: pygls' protocol and server classes as devlint needs them (malformed messages
answered, changes to unopened documents ignored, errors to the client's log, and the client's
pipe read on the event loop itself). Imports pygls: import this only where pygls may be missing
and an ``ImportError`` is handled."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcMethodNotFound, JsonRpcParseError
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.json_rpc import JsonRPCNotification
from pygls.protocol.language_server import lsp_method

logger = logging.getLogger(__name__)

#: Errors that are the client's doing: already answered (an unknown method, bad params) or
#: nothing to answer (a body that is not JSON, or not UTF-8).
CLIENT_ERRORS = (JsonRpcMethodNotFound, JsonRpcInvalidParams, JsonRpcInvalidRequest, JsonRpcParseError,
                 json.JSONDecodeError, UnicodeDecodeError)


def _client_error_is_a_warning(record: logging.LogRecord) -> bool:
    """pygls' reader logs a message it cannot read with a traceback at error level: a client's
    malformed message is a warning, with no traceback."""
    error = record.exc_info[1] if record.exc_info else None
    if isinstance(error, CLIENT_ERRORS):
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        record.msg, record.args, record.exc_info, record.exc_text = "devlint: dropped a malformed message: %r", (error,), None, None
    return True


logger.addFilter(_client_error_is_a_warning)  # the logger start_io hands to pygls' reader


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
    """pygls' server, reporting internal errors to the client's log and reading stdio on
    the event loop."""

    def report_server_error(self, error, source):
        """Errors go to the client's log, never to a pop-up: the client's own mistakes
        (:data:`CLIENT_ERRORS`) as warnings, anything else as an internal error."""
        client_side = isinstance(error, CLIENT_ERRORS)
        try:
            self.window_log_message(types.LogMessageParams(
                type=types.MessageType.Warning if client_side else types.MessageType.Error,
                message=f"devlint: {'client error' if client_side else 'internal error'}: {error!r}"))
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
