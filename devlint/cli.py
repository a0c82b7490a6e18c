"""The ``devlint`` command: ``check`` (the linter), ``rule`` (rule docs), ``runtime``.

Exit codes, as ruff's: 0 no findings, 1 findings, 2 usage or internal error.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Sequence

from . import __version__, formats
from .config import ConfigError, Config, resolve as resolve_config
from .engine import PARSE_ERROR, enabled_rules
from .finding import Finding
from .formats.text import line as _text_line
from .rules import all_rules
from .cache import Cache
from .runner import check_paths, discover

def _files(count: int) -> str:
    return f"{count} file" if count == 1 else f"{count} files"


def _codes(value: str) -> list[str]:
    return [c.strip().upper() for c in value.split(",") if c.strip()]


def format_text(finding: Finding) -> str:
    """``path:line:col: CODE message`` with a 1-based column, as flake8 and ruff print."""
    return _text_line(finding)


def repository_root(start: str | None = None) -> Path:
    """The nearest folder holding ``.git`` from ``start`` (default: the current folder)
    upwards, else the current folder: machine-readable formats give paths relative to it."""
    here = Path(os.path.abspath(start or os.getcwd()))
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return Path(os.getcwd())


def _per_file_dropped(finding: Finding, config: Config) -> bool:
    codes = config.ignored_codes(finding.path)
    return bool(codes) and finding.code.startswith(tuple(codes))


def _statistics(findings: Sequence[Finding], fmt: str) -> str:
    counts = Counter(f.code for f in findings)
    names = {r.code: r.name for r in all_rules()} | {PARSE_ERROR: "unreadable-file"}
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    if fmt == "json":
        import json

        return json.dumps([{"code": c, "name": names.get(c, ""), "count": n} for c, n in rows], indent=2) + "\n"
    width = max((len(str(n)) for _, n in rows), default=1)
    return "".join(f"{n:>{width}}\t{c}\t{names.get(c, '')}\n" for c, n in rows)


def _fix_files(files: Sequence[str], select: Sequence[str], ignore: Sequence[str], args: argparse.Namespace) -> int:
    """Apply autofixes in place (``--fix``) or print them as a unified diff (``--diff``)."""
    import difflib

    from .fix import fix_source

    total = 0
    for path in files:
        if path == "-":
            continue
        try:
            data = Path(path).read_bytes()
        except OSError:
            continue
        new, count = fix_source(data, path, select, ignore, unsafe=args.unsafe_fixes)
        if not count:
            continue
        total += count
        if args.diff:
            before = data.decode("utf-8", "replace").splitlines(keepends=True)
            after = new.decode("utf-8", "replace").splitlines(keepends=True)
            sys.stdout.writelines(difflib.unified_diff(before, after, f"a/{path}", f"b/{path}"))
        else:
            Path(path).write_bytes(new)
    return total


def cmd_check(args: argparse.Namespace) -> int:
    try:
        config = resolve_config(args.paths, isolated=args.isolated)
    except ConfigError as exc:
        print(f"devlint: error: {exc}", file=sys.stderr)
        return 2
    select, ignore = config.selection(
        _codes(args.select) if args.select else None,
        _codes(args.extend_select) if args.extend_select else (),
        _codes(args.ignore) if args.ignore else (),
    )
    rules = enabled_rules(select, ignore)
    if not rules and not any(PARSE_ERROR.startswith(s) or s.startswith(PARSE_ERROR) for s in select):
        print(f"devlint: error: no rule matches --select {','.join(select)}", file=sys.stderr)
        return 2
    if args.statistics and args.format not in ("text", "json"):
        print("devlint: error: --statistics works with --format text or json", file=sys.stderr)
        return 2
    files = list(discover(
        args.paths or ["."], exclude=config.exclude, extend_exclude=config.extend_exclude,
        root=config.root, force_exclude=args.force_exclude,
    ))
    fixed = 0
    if args.fix or args.diff:
        fixed = _fix_files(files, select, ignore, args)
        if args.diff:
            print(f"Would fix {fixed} {'finding' if fixed == 1 else 'findings'}.", file=sys.stderr)
            return 1 if fixed else 0
    cache = None if args.no_cache else Cache(config.root or Path.cwd(), select, ignore)
    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    findings = check_paths(files, select, ignore, jobs=max(1, jobs), cache=cache)
    if config.per_file_ignores:
        findings = [f for f in findings if not _per_file_dropped(f, config)]
    if args.statistics:
        report = _statistics(findings, args.format)
    else:
        report = formats.get(args.format)(findings, rules, repository_root())
    if args.format == "text":
        if findings:
            noun = "finding" if len(findings) == 1 else "findings"
            touched = len({f.path for f in findings})
            report += f"Found {len(findings)} {noun} in {touched} of {_files(len(files))}.\n"
        else:
            report += f"All checks passed ({_files(len(files))}).\n"
        if fixed:
            report += f"Fixed {fixed} {'finding' if fixed == 1 else 'findings'}.\n"
    if args.output_file:
        Path(args.output_file).parent.mkdir(parents=True, exist_ok=True)
        Path(args.output_file).write_text(report, encoding="utf-8")
    else:
        sys.stdout.write(report)
    return 1 if findings and not args.exit_zero else 0


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
    from .server import main as serve

    return serve()


def cmd_runtime(args: argparse.Namespace) -> int:
    from .runtime import cli as runtime_cli  # torch is imported only past this point

    return runtime_cli.run(args)


def build_parser(with_runtime: bool = False) -> argparse.ArgumentParser:
    """The argument parser; the ``runtime`` subcommand's options are added only when it is
    the command being run, so that ``devlint check`` never imports torch."""
    parser = argparse.ArgumentParser(prog="devlint", description="Lint PyTorch code for device portability and mixed-precision correctness.")
    parser.add_argument("--version", action="version", version=f"devlint {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = sub.add_parser("check", help="lint files and directories")
    check.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (default: .)")
    check.add_argument("--select", help="comma-separated code prefixes to enable (default: DEV)")
    check.add_argument("--extend-select", help="code prefixes to enable on top of --select")
    check.add_argument("--ignore", help="comma-separated code prefixes to disable")
    check.add_argument("--format", choices=formats.NAMES, default="text", help="output format (default: text)")
    check.add_argument("--output-file", metavar="FILE", help="write the report to FILE instead of standard output")
    check.add_argument("--exit-zero", action="store_true", help="exit 0 even when there are findings")
    check.add_argument("--statistics", action="store_true", help="print the number of findings per code instead of each finding")
    check.add_argument("--force-exclude", action="store_true", help="apply exclude patterns to files named on the command line too")
    check.add_argument("--isolated", action="store_true", help="ignore [tool.devlint] in pyproject.toml")
    check.add_argument("--fix", action="store_true", help="apply safe autofixes in place, then report what is left")
    check.add_argument("--unsafe-fixes", action="store_true", help="with --fix or --diff, also apply unsafe autofixes")
    check.add_argument("--diff", action="store_true", help="print the autofixes as a unified diff and change nothing")
    check.add_argument("-j", "--jobs", type=int, metavar="N", help="worker processes (default: the CPU count)")
    check.add_argument("--no-cache", action="store_true", help="neither read nor write .devlint_cache/")
    check.set_defaults(func=cmd_check)

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
        args = parser.parse_args(argv)
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
