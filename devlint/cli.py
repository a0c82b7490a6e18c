"""The ``devlint`` command: ``check`` (the linter), ``rule`` (rule docs), ``server``, ``runtime``.

Exit codes, as ruff's: 0 no findings, 1 findings, 2 usage or internal error. ``check``
follows ruff's command line where the two overlap (``--output-format``, ``--fix``,
``--unsafe-fixes``, ``--diff``, ``--show-fixes``, ``--statistics``, ``--add-noqa``,
``--watch``, ``--stdin-filename``, ``--config``, ``--quiet``, ``--show-files``,
``--show-settings``, ``--select ALL``, ``--no-respect-gitignore``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from . import __version__
from .format_names import ALIASES, NAMES


def cmd_check(args: argparse.Namespace) -> int:
    from .check_command import run_check  # the linter (and libcst) load only for ``check``

    return run_check(args)


def cmd_rule(args: argparse.Namespace) -> int:
    from .rule_docs import markdown, read_all  # the rule files read as text: no libcst

    rules = read_all()
    if args.all or not args.code:
        for rule in rules:
            print(f"{rule.code}  {rule.name:<40} {rule.summary()}")
        return 0
    wanted = args.code.upper()
    for rule in rules:
        if wanted in (rule.code, rule.name.upper()):
            print(markdown(rule))
            return 0
    print(f"devlint: error: unknown rule {args.code}", file=sys.stderr)
    return 2


def cmd_server(args: argparse.Namespace) -> int:
    from .lsp.server import main as serve

    return serve()


def cmd_runtime(args: argparse.Namespace) -> int:
    from .runtime import cli as runtime_cli  # torch is imported only past this point

    return runtime_cli.run(args)


class _Parser(argparse.ArgumentParser):
    """Usage errors exit 2 after printing the usage of the (sub)command they concern."""

    def error(self, message: str):  # noqa: D102 - argparse's hook
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser(with_runtime: bool = False) -> argparse.ArgumentParser:
    """The argument parser; the ``runtime`` subcommand's options are added only when it is
    the command being run, so that ``devlint check`` never imports torch."""
    parser = _Parser(prog="devlint", description="Lint PyTorch code for device portability and mixed-precision correctness.")
    parser.add_argument("--version", action="version", version=f"devlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    check = sub.add_parser("check", help="lint files and directories")
    parser.set_defaults(_subcommands={"check": check})
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .); - reads standard input")
    rules = check.add_argument_group("rule selection")
    rules.add_argument("--select", help="comma-separated code prefixes to enable, or ALL (default: DEV)")
    rules.add_argument("--extend-select", help="code prefixes to enable on top of --select")
    rules.add_argument("--ignore", help="comma-separated code prefixes to disable")
    fixing = check.add_argument_group("autofix")
    fixing.add_argument("--fix", action="store_true", help="apply safe autofixes in place, then report what is left")
    fixing.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff, also apply unsafe autofixes; mark them [*]")
    fixing.add_argument("--diff", action="store_true", help="print the autofixes as a unified diff and change nothing")
    fixing.add_argument("--show-fixes", action="store_true", help="with --fix or --diff, list the fixed findings per file")
    fixing.add_argument("--add-noqa", action="store_true", help="add # noqa: CODE to every line with a finding (merged into an existing # noqa)")
    output = check.add_argument_group("output")
    output.add_argument("--output-format", "--format", dest="output_format",
                        choices=(*NAMES, *ALIASES), metavar="FORMAT",
                        help="full (the default: source line and caret), concise (one line a finding), json (ruff's "
                             "schema), sarif, github, gitlab, or json-devlint (devlint's own JSON); $DEVLINT_OUTPUT_FORMAT sets the default")
    output.add_argument("--output-file", metavar="FILE", help="write the report to FILE instead of standard output")
    output.add_argument("--statistics", action="store_true", help="print the number of findings per code (and which --fix fixes) instead of each finding")
    output.add_argument("-q", "--quiet", action="store_true", help="print the findings only, no summary")
    output.add_argument("-s", "--silent", action="store_true", help="print nothing (the exit code tells)")
    output.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    output.add_argument("--show-files", action="store_true", help="list the files that would be checked, and stop")
    output.add_argument("--show-settings", action="store_true", help="print the settings that apply to the first file, and stop")
    files = check.add_argument_group("files and settings")
    files.add_argument("--config", metavar="FILE", help="use this pyproject.toml (its [tool.devlint]) or devlint.toml for every file; or TOML inline: \"ignore = ['DEV104']\"")
    files.add_argument("--isolated", action="store_true", help="ignore every [tool.devlint] in pyproject.toml")
    files.add_argument("--stdin-filename", metavar="PATH", help="the name of the file read from standard input (settings, messages)")
    files.add_argument("--force-exclude", action="store_true", help="apply exclude patterns to files named on the command line too")
    files.add_argument("--no-respect-gitignore", dest="respect_gitignore", action="store_false",
                       help="also check files that .gitignore ignores")
    files.add_argument("--respect-gitignore", dest="respect_gitignore", action="store_true", help=argparse.SUPPRESS)
    files.add_argument("--torch-version", metavar="X.Y", help="the oldest torch the code supports (as torch-version in [tool.devlint])")
    files.add_argument("--target-version", metavar="pyXY", help="the oldest Python the code runs on, as py311 or 3.11 (default: this one)")
    files.add_argument("--watch", action="store_true", help="check again whenever a file changes")
    files.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes, 1 or more (default: the CPU count)")
    files.add_argument("--no-cache", action="store_true", help="neither read nor write .devlint_cache/")
    check.set_defaults(func=cmd_check, respect_gitignore=True)

    rule = sub.add_parser("rule", help="show a rule's docs, or list every rule")
    rule.add_argument("code", nargs="?", help="a code (DEV101) or name (hardcoded-accelerator-device)")
    rule.add_argument("--all", action="store_true", help="list code, name and summary of every rule")
    rule.set_defaults(func=cmd_rule)

    server = sub.add_parser("server", help="run the language server over stdio (needs devlint[server])")
    server.set_defaults(func=cmd_server)

    runtime = sub.add_parser("runtime", help="run a training step on every device and compare (needs torch)")
    if with_runtime:
        from .runtime import cli as runtime_cli

        runtime_cli.add_arguments(runtime)
    runtime.set_defaults(func=cmd_runtime)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(with_runtime=bool(argv) and argv[0] == "runtime")
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # `check --bogus`: the usage of check, not of devlint
            command = getattr(args, "_subcommands", {}).get(getattr(args, "command", None), parser)
            command.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        return 2
    except BrokenPipeError:
        return 1
    except Exception as exc:  # noqa: BLE001 - an internal error is exit 2, with one line
        print(f"devlint: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
