"""``devlint server``: a language server (LSP 3.17 over stdio) for editors, built on pygls.

Diagnostics: every open Python file and every Python cell of an open notebook (LSP notebook
document sync; the code cells are linted as one program, as ``devlint check`` does, and each
cell gets its own diagnostics) is linted with the settings of its own ``pyproject.toml``
(``select``/``ignore``, ``exclude``/``extend-exclude``, ``per-file-ignores``; found per file and
read again when it changes) and ``# noqa``, exactly as ``devlint check`` lints it.

Never behind the typing: lints run on one worker thread, at most one at a time. A change
starts a lint at once when none runs (:data:`devlint.lsp.session.DEBOUNCE` is 0; ``initializationOptions:
{"debounce": seconds}`` waits that long after the last change instead); a change that arrives
while a lint runs makes that lint stale: it stops at its next statement (never published) and
the newest text is linted right after, so the latest text always wins. Requests (code actions,
hover) are answered on the protocol thread meanwhile. The event loop reads the client's pipe
itself (no reader thread) and the interpreter lock is handed over every
:data:`devlint.lsp.server.SWITCH_INTERVAL`, so a keystroke reaches the lint thread within a few milliseconds even
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

Modules, one concern each: :mod:`~devlint.lsp.encoding` (positions in the client's units),
:mod:`~devlint.lsp.settings` (each file's ``[tool.devlint]``), :mod:`~devlint.lsp.document_lint`
(one buffer through the engine's pipeline), :mod:`~devlint.lsp.worker` (the lint thread),
:mod:`~devlint.lsp.session` (the state both threads share), :mod:`~devlint.lsp.diagnostics`
(findings as diagnostics and edits), :mod:`~devlint.lsp.code_actions`, :mod:`~devlint.lsp.hover`,
:mod:`~devlint.lsp.transport` (pygls' protocol and stdio) and :mod:`~devlint.lsp.server`
(the features registered; ``main``). Only session, diagnostics, code_actions, hover,
transport and server import pygls or lsprotocol.
"""
