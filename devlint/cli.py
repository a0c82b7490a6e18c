"""The ``devlint`` command: ``check`` (the linter), ``rule`` (rule docs), ``server``, ``runtime``.

Exit codes, as ruff's: 0 no findings, 1 findings, 2 usage or internal error. ``check``
follows ruff's command line where the two overlap (``--output-format``, ``--fix``,
``--unsafe-fixes``, ``--diff``, ``--show-fixes``, ``--statistics``, ``--add-noqa``,
``--watch``, ``--stdin-filename``, ``--config``, ``--quiet``, ``--show-files``,
``--show-settings``, ``--select ALL``, ``--no-respect-gitignore``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from . import __version__, formats
from .cache import Cache
from .config import Config, ConfigError, Resolver, check_codes, parse_version
from .engine import enabled_rules
from .finding import PARSE_ERROR, Finding
from .fix import FileFix
from .formats.text import applicable
from .rules import all_rules
from .runner import check_paths, check_source, discover, display_path, read_file
from .source import split_lines


class UsageError(Exception):
    """A bad command line or configuration: exit 2 with one line."""


def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


def _findings(count: int) -> str:
    return f"{count} finding" if count == 1 else f"{count} findings"


def _codes(value: str | None, flag: str) -> list[str] | None:
    """Comma-separated selectors -> list (``None`` if the flag was not given)."""
    if value is None:
        return None
    codes = [c.strip().upper() for c in value.split(",") if c.strip()]
    if not codes:
        raise UsageError(f"{flag} {value!r} selects nothing: give codes or prefixes (DEV1, DEV206) or ALL")
    try:
        check_codes(codes, flag)
    except ConfigError as exc:
        raise UsageError(str(exc)) from None
    return codes


def repository_root(start: str | None = None) -> Path:
    """The nearest folder holding ``.git`` from ``start`` (default: the current folder)
    upwards, else the current folder: machine-readable formats give paths relative to it."""
    here = Path(os.path.abspath(start or os.getcwd()))
    for folder in (here, *here.parents):
        if os.path.exists(folder / ".git"):  # never raises, even where a folder cannot be searched
            return folder
    return Path(os.getcwd())


def use_color(stream=None) -> bool:
    """Colour on a terminal; ``NO_COLOR`` (any value) turns it off, ``FORCE_COLOR`` on
    (https://no-color.org, https://force-color.org)."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)()) and os.environ.get("TERM") != "dumb"


def _per_file_dropped(finding: Finding, config: Config) -> bool:
    codes = config.ignored_codes(finding.path)
    return bool(codes) and finding.code.startswith(tuple(codes))


def _statistics(findings: Sequence[Finding], fmt: str, unsafe: bool) -> str:
    counts = Counter(f.code for f in findings)
    fixable = {f.code for f in findings if applicable(f, unsafe)}
    names = {r.code: r.name for r in all_rules()} | {PARSE_ERROR: "unreadable-file"}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        import json

        return json.dumps([{"code": c, "name": names.get(c, ""), "count": n, "fixable": c in fixable} for c, n in rows],
                          indent=2) + "\n"
    width = max((len(str(n)) for _, n in rows), default=1)
    return "".join(f"{n:>{width}}\t{c}\t{'[*]' if c in fixable else '[ ]'} {names.get(c, '')}\n" for c, n in rows)


# -- one run ------------------------------------------------------------------------------

class Run:
    """The settings of one ``check`` run: selection per file, formats, fix mode."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        if args.jobs is not None and args.jobs < 1:
            raise UsageError(f"-j/--jobs must be 1 or more, got {args.jobs}")
        self.select = _codes(args.select, "--select")
        self.extend_select = _codes(args.extend_select, "--extend-select") or []
        self.ignore = _codes(args.ignore, "--ignore") or []
        self.format = formats.ALIASES.get(args.output_format, args.output_format) if args.output_format else None
        if self.format is None:
            env = os.environ.get("DEVLINT_OUTPUT_FORMAT", "").strip().lower()
            self.format = formats.ALIASES.get(env, env) if env in (*formats.NAMES, *formats.ALIASES) else "full"
        if args.statistics and self.format not in ("full", "concise", "json"):
            raise UsageError("--statistics works with --output-format full, concise or json")
        self.torch_version = parse_version(args.torch_version) if args.torch_version else None
        try:
            self.resolver = Resolver(args.config, isolated=args.isolated)
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

    def config(self, path: str) -> Config:
        target = self.args.stdin_filename if path == "-" and self.args.stdin_filename else path
        try:
            return self.resolver(target if target != "-" else os.getcwd())
        except ConfigError as exc:
            raise UsageError(str(exc)) from None

    def selection(self, config: Config) -> tuple[list[str], list[str]]:
        return config.selection(self.select, self.extend_select, self.ignore)

    def files(self) -> list[str]:
        args = self.args
        paths = args.paths or ["."]
        if args.stdin_filename and paths == ["."] and not args.paths:
            return ["-"]
        try:
            return list(discover(paths, force_exclude=args.force_exclude, config_for=self.config,
                                 respect_gitignore=args.respect_gitignore))
        except ConfigError as exc:
            raise UsageError(str(exc)) from None


def _groups(run: Run, files: Sequence[str]) -> list[tuple[Config, list[str]]]:
    """Files grouped by the configuration that applies to each (one group without
    per-folder configurations)."""
    groups: dict[int, tuple[Config, list[str]]] = {}
    for path in files:
        config = run.config(path)
        groups.setdefault(id(config), (config, []))[1].append(path)
    return list(groups.values())


def _diff(path: str, before: bytes, after: bytes, changed=None) -> str:
    import difflib

    if changed is not None:  # a notebook: one diff per changed cell, as ruff prints
        return "".join(
            "".join(difflib.unified_diff(split_lines(old, keepends=True), split_lines(new, keepends=True),
                                         f"a/{path}:cell {number}", f"b/{path}:cell {number}"))
            for number, old, new in changed
        )
    return FileFix(path, before, after, 1).diff()


def _fix_files(run: Run, groups, stdin: dict[str, bytes]) -> tuple[int, Counter, dict[str, bytes], list[Finding]]:
    """Apply autofixes in place (``--fix``) or print them as a unified diff (``--diff``).

    Returns (findings fixed, fixed findings per (path, code), fixed text of standard input,
    a DEV000 for each file that could not be written). A finding counts as fixed when the
    file has one fewer of its code afterwards. ``per-file-ignores`` hold for fixes too; a
    file is replaced atomically (:func:`devlint.fix.write_atomic`)."""
    from .fix import fix_notebook, fix_source, write_atomic

    args = run.args
    fixed_by: Counter = Counter()
    outputs: dict[str, bytes] = {}
    errors: list[Finding] = []
    for config, files in groups:
        select, group_ignore = run.selection(config)
        for path in files:
            name = args.stdin_filename or path if path == "-" else path
            ignore = [*group_ignore, *config.ignored_codes(name)]
            try:
                data = stdin[path] if path == "-" else read_file(path)
            except (OSError, KeyError):
                continue
            changed = None
            if name.endswith(".ipynb"):
                new, count, changed = fix_notebook(data, name, select, ignore, unsafe=args.unsafe_fixes)
            else:
                new, count = fix_source(data, name, select, ignore, unsafe=args.unsafe_fixes)
            if path == "-":
                outputs[path] = new
            if not count or new == data:
                continue
            before = Counter(f.code for f in _lint_bytes(data, name, select, ignore))
            after = Counter(f.code for f in _lint_bytes(new, name, select, ignore))
            for code, number in (before - after).items():
                fixed_by[(display_path(name), code)] += number
            if args.diff:
                sys.stdout.write(_diff(display_path(name), data, new, changed))
            elif path != "-":
                try:
                    write_atomic(path, new)
                except OSError as exc:
                    for code, number in (before - after).items():
                        fixed_by[(display_path(name), code)] -= number
                    message = f"could not write the fixed file, left unchanged: {exc.strerror or exc}"
                    errors.append(Finding(path, 1, 0, PARSE_ERROR, message, 1, 0))
    return sum(fixed_by.values()), +fixed_by, outputs, errors


def _lint_bytes(data: bytes, path: str, select, ignore) -> list[Finding]:
    if path.endswith(".ipynb"):
        from . import notebook

        return notebook.check(data, path, check_source, select, ignore)
    return check_source(data, path, select, ignore)


def _summary(findings: Sequence[Finding], files: int, unsafe: bool) -> str:
    if not findings:
        return f"All checks passed ({_files(files)}).\n"
    touched = len({f.path for f in findings})
    safe = sum(1 for f in findings if applicable(f, unsafe))
    more = 0 if unsafe else sum(1 for f in findings if applicable(f, True)) - safe
    if safe and more:
        note = f" ({safe} fixable with `--fix`; {more} more with `--unsafe-fixes`)"
    elif safe:
        note = f" ({safe} fixable with `--fix --unsafe-fixes`)" if unsafe else f" ({safe} fixable with `--fix`)"
    elif more:
        note = f" ({more} fixable with `--fix --unsafe-fixes`)"
    else:
        note = ""
    return f"Found {_findings(len(findings))} in {touched} of {_files(files)}{note}.\n"


def _show_fixes(fixed_by: Counter) -> str:
    if not fixed_by:
        return "No fixes applied.\n"
    names = {r.code: r.name for r in all_rules()}
    out = [f"Fixed {_findings(sum(fixed_by.values()))}:"]
    for path in sorted({p for p, _ in fixed_by}):
        out.append(f"- {path}:")
        for (p, code), count in sorted(fixed_by.items()):
            if p == path:
                out.append(f"    {count} × {code} ({names.get(code, '')})")
    return "\n".join(out) + "\n"


def check_once(run: Run) -> int:
    """One ``devlint check`` over the paths: returns the exit code."""
    args = run.args
    files = run.files()
    if args.show_files:
        sys.stdout.writelines(display_path(p) + "\n" for p in files)
        return 0
    if args.show_settings:
        return _print_settings(run, files)
    if not files:
        print("devlint: warning: No Python files found under the given path(s)", file=sys.stderr)
        return 0
    stdin: dict[str, bytes] = {}
    if "-" in files:
        stdin["-"] = sys.stdin.buffer.read()
        formats.SOURCES[display_path(args.stdin_filename) if args.stdin_filename else "-"] = stdin["-"].decode("utf-8", "replace")
    groups = _groups(run, files)
    fixed = 0
    fixed_by: Counter = Counter()
    fix_errors: list[Finding] = []
    if args.fix or args.diff:
        fixed, fixed_by, outputs, fix_errors = _fix_files(run, groups, stdin)
        if args.diff:
            if args.show_fixes:
                sys.stderr.write(_show_fixes(fixed_by))
            print(f"Would fix {_findings(fixed)}.", file=sys.stderr)
            return 1 if fixed else 0
        if "-" in outputs:  # as ruff: the fixed source goes to standard output, the report to stderr
            stdin["-"] = outputs["-"]
            sys.stdout.buffer.write(outputs["-"])
            sys.stdout.flush()
    if args.add_noqa:
        return _add_noqa(run, groups)
    findings: list[Finding] = list(fix_errors)
    rules_ran: dict[str, type] = {}
    for config, paths in groups:
        select, ignore = run.selection(config)
        rules = enabled_rules(select, ignore)
        if not rules and not any(PARSE_ERROR.startswith(s) or s.startswith(PARSE_ERROR) for s in select):
            raise UsageError(f"no rule matches --select {','.join(select)}")
        rules_ran.update((r.code, r) for r in rules)
        disk = [p for p in paths if p != "-"]
        from .settings import torch_version

        salt = [*select, f"@torch-version={torch_version()}"]  # the setting changes fixes and messages
        cache = None if args.no_cache else Cache(config.root or Path.cwd(), salt, ignore)
        jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
        found = check_paths(disk, select, ignore, jobs=jobs, cache=cache) if disk else []
        if "-" in paths:
            name = args.stdin_filename or "-"
            found += [replace(f, path=name) for f in _lint_bytes(stdin["-"], name, select, ignore)]
        if config.per_file_ignores:
            found = [f for f in found if not _per_file_dropped(f, config)]
        findings.extend(found)
    findings = sorted((replace(f, path=display_path(f.path)) for f in findings),
                      key=lambda f: (f.path, f.cell or 0, f.line, f.column, f.code))
    rules = [rules_ran[c] for c in sorted(rules_ran)]
    color = use_color() and not args.output_file and run.format in ("full", "concise")
    unsafe = args.unsafe_fixes
    if args.statistics:
        report = _statistics(findings, run.format, unsafe)
    elif run.format in ("full", "concise"):
        from .formats.text import render

        report = render(findings, rules, repository_root(), full=run.format == "full", unsafe=unsafe, color=color)
    else:
        report = formats.get(run.format)(findings, rules, repository_root())
    if args.silent:
        report = ""
    elif run.format in ("full", "concise") and not args.quiet:
        report += _summary(findings, len(files), unsafe)
        if args.show_fixes and args.fix:
            report += _show_fixes(fixed_by)
        elif fixed:
            report += f"Fixed {_findings(fixed)}.\n"
    out = sys.stderr if "-" in stdin and args.fix else sys.stdout
    _emit(report, args.output_file, out)
    return 1 if findings and not args.exit_zero else 0


def _emit(report: str, output_file: str | None, out) -> None:
    """Write the report to ``output_file`` (UTF-8) or ``out``. A file name that is not valid
    in the file system's encoding goes out as its own bytes (``surrogateescape``)."""
    if output_file:
        Path(output_file).parent.mkdir(parents=True, exist_ok=True)
        Path(output_file).write_bytes(report.encode("utf-8", "surrogateescape"))
        return
    try:
        out.write(report)
    except UnicodeEncodeError:  # a strict console encoding: what it cannot show is escaped
        encoding = out.encoding or "utf-8"
        try:
            data = report.encode(encoding, "surrogateescape")
        except UnicodeEncodeError:
            data = report.encode(encoding, "backslashreplace")
        out.flush()
        out.buffer.write(data)
        out.flush()


def _print_settings(run: Run, files: Sequence[str]) -> int:
    """``--show-settings``: the configuration that applies to the first file (or the folder)."""
    target = files[0] if files else (run.args.paths or ["."])[0]
    config = run.config(target)
    select, ignore = run.selection(config)
    rows = [
        ("file", display_path(target)),
        ("configuration", str(config.path) if config.path else "(none: defaults)"),
        ("select", ", ".join(select)),
        ("ignore", ", ".join(ignore) or "-"),
        ("per-file-ignores", ", ".join(f"{k} = {v}" for k, v in config.per_file_ignores.items()) or "-"),
        ("exclude", ", ".join(config.exclude) if config.exclude is not None else "(default folders)"),
        ("extend-exclude", ", ".join(config.extend_exclude) or "-"),
        ("respect-gitignore", str(config.respect_gitignore and run.args.respect_gitignore).lower()),
        ("torch-version", ".".join(map(str, run.torch_version or config.torch_version or ())) or "-"),
        ("rules", ", ".join(r.code for r in enabled_rules(select, ignore))),
        ("output-format", run.format),
    ]
    width = max(len(k) for k, _ in rows)
    sys.stdout.writelines(f"{k:<{width}} = {v}\n" for k, v in rows)
    return 0


def _add_noqa(run: Run, groups) -> int:
    """``--add-noqa``: a ``# noqa: CODE`` for every finding, merged into an existing
    ``# noqa`` (:func:`devlint.noqa.add`); a file whose new comments would not silence every
    finding is left unchanged."""
    from . import noqa, source
    from .fix import write_atomic

    total = 0
    for config, files in groups:
        select, ignore = run.selection(config)
        for path in files:
            if path == "-" or path.endswith(".ipynb"):
                continue
            try:
                data = read_file(path)
                decoded = source.decode(data)
                text = decoded.text
            except (OSError, SyntaxError, UnicodeDecodeError, LookupError):
                continue
            findings = [f for f in check_source(data, path, select, ignore)
                        if f.code != PARSE_ERROR and not _per_file_dropped(f, config)]
            new, added = noqa.add(text, findings)
            if added and not noqa.apply(findings, new):
                try:
                    write_atomic(path, decoded.encode(new))  # the BOM and cookie's encoding kept
                except (OSError, UnicodeEncodeError) as exc:
                    print(f"devlint: warning: {display_path(path)}: could not write: {exc}; left unchanged", file=sys.stderr)
                    continue
                total += added
            elif added:
                print(f"devlint: warning: {display_path(path)}: could not place # noqa comments that silence every finding; left unchanged", file=sys.stderr)
    print(f"Added {total} noqa {'directive' if total == 1 else 'directives'}.", file=sys.stderr)
    return 0


def _watch(run: Run) -> int:
    """``--watch``: check, then check again whenever a file under the paths changes."""
    from .watch import changes

    paths = run.args.paths or ["."]
    while True:
        print("\x1b[2J\x1b[H" if use_color() else "", end="")
        print(f"[devlint --watch] checking {' '.join(paths)}", file=sys.stderr, flush=True)
        try:
            formats._lines.cache_clear()  # fresh source lines and settings on every pass
            run = Run(run.args)
            check_once(run)
        except UsageError as exc:
            print(f"devlint: error: {exc}", file=sys.stderr)
        sys.stdout.flush()
        print("[devlint --watch] waiting for changes (Ctrl-C to stop)", file=sys.stderr, flush=True)
        changes(paths)


def cmd_check(args: argparse.Namespace) -> int:
    try:
        run = Run(args)
        _set_torch_version(run)
        if args.watch:
            return _watch(run)
        return check_once(run)
    except UsageError as exc:
        print(f"devlint: error: {exc}", file=sys.stderr)
        return 2


def _set_torch_version(run: Run) -> None:
    """Tell the rules the oldest torch to support (``--torch-version`` or the
    configuration of the first path): the environment carries it to worker processes."""
    from . import settings

    version = run.torch_version
    if version is None:
        first = (run.args.paths or ["."])[0]
        version = run.config(first).torch_version
    settings.set_torch_version(version)


def cmd_rule(args: argparse.Namespace) -> int:
    rules = all_rules()
    if args.all or not args.code:
        for rule in rules:
            print(f"{rule.code}  {rule.name:<40} {rule.summary()}")
        return 0
    wanted = args.code.upper()
    for rule in rules:
        if wanted in (rule.code, rule.name.upper()):
            print(rule.docs())
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
                        choices=(*formats.NAMES, *formats.ALIASES), metavar="FORMAT",
                        help="full (the default: source line and caret), concise (one line a finding), json, sarif, "
                             "github or gitlab; $DEVLINT_OUTPUT_FORMAT sets the default")
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
