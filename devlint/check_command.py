"""``devlint check``: one run over the paths (files found, settings per file, the cache, the
worker processes), its autofixes (``--fix``/``--diff``), ``--add-noqa``, ``--watch``, and the
report in the chosen format. The command line itself is :mod:`devlint.cli`, which imports this
module only when ``check`` runs, so that ``--version``, ``--help`` and ``rule`` load none of it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Sequence

from . import formats
from .cache import Cache
from .config import Config, ConfigError, Resolver, check_codes, parse_version
from .engine import enabled_rules
from .finding import PARSE_ERROR, Finding
from .fix import FileFix
from .formats import sources
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
        self.target_version = _target(args.target_version) if getattr(args, "target_version", None) else None
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
    from .fix import unified_diff

    if changed is not None:  # a notebook: one diff per changed cell, as ruff prints
        return "".join(
            unified_diff(split_lines(old, keepends=True), split_lines(new, keepends=True),
                         f"a/{path}:cell {number}", f"b/{path}:cell {number}")
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
        _use_torch_version(run, config)
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
    if args.show_files:  # sorted, as ruff lists them
        sys.stdout.writelines(sorted(display_path(p) + "\n" for p in files))
        return 0
    if args.show_settings:
        return _print_settings(run, files)
    if not files:
        print("devlint: warning: No Python files found under the given path(s)", file=sys.stderr)
        return 0
    stdin: dict[str, bytes] = {}
    if "-" in files:
        stdin["-"] = sys.stdin.buffer.read()
        sources.SOURCES[display_path(args.stdin_filename) if args.stdin_filename else "-"] = stdin["-"].decode("utf-8", "replace")
    groups = _groups(run, files)
    fixed = 0
    fixed_by: Counter = Counter()
    fix_errors: list[Finding] = []
    if args.fix or args.diff:
        fixed, fixed_by, outputs, fix_errors = _fix_files(run, groups, stdin)
        if args.diff:  # the diffs, then what they fix, on standard output
            if args.show_fixes:
                sys.stdout.write(_show_fixes(fixed_by))
            if not args.silent:
                print(f"Would fix {_findings(fixed)}.")
            return 1 if fixed else 0
        if "-" in outputs:  # as ruff: the fixed source goes to standard output, the report to stderr
            stdin["-"] = outputs["-"]
            # the report that follows shows the fixed text's lines, so its snippets must come from it
            sources.SOURCES[display_path(args.stdin_filename) if args.stdin_filename else "-"] = outputs["-"].decode("utf-8", "replace")
            sys.stdout.buffer.write(outputs["-"])
            sys.stdout.flush()
    if args.add_noqa:
        return _add_noqa(run, groups)
    findings: list[Finding] = list(fix_errors)
    rules_ran: dict[str, type] = {}
    for config, paths in groups:
        select, ignore = run.selection(config)
        _use_torch_version(run, config)
        rules = enabled_rules(select, ignore)
        if not rules and not any(PARSE_ERROR.startswith(s) or s.startswith(PARSE_ERROR) for s in select):
            raise UsageError(f"no rule matches --select {','.join(select)}")
        rules_ran.update((r.code, r) for r in rules)
        disk = [p for p in paths if p != "-"]
        from .settings import torch_version

        from .syntax import target_version

        salt = [*select, f"@torch-version={torch_version()}", f"@target-version={target_version()}"]  # the settings change fixes, messages, DEV000
        cache = None if args.no_cache else Cache(config.root or Path.cwd(), salt, ignore)
        jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
        found = check_paths(disk, select, ignore, jobs=jobs, cache=cache) if disk else []
        if "-" in paths:
            name = args.stdin_filename or "-"
            found += [replace(f, path=name) for f in _lint_bytes(stdin["-"], name, select, ignore)]
        if config.per_file_ignores:
            found = [f for f in found if not _per_file_dropped(f, config)]
        findings.extend(found)
    shown: dict[str, str] = {}  # one display path per file, not per finding
    for f in findings:
        if f.path not in shown:
            shown[f.path] = display_path(f.path)
    findings = sorted((f if shown[f.path] == f.path else f.with_path(shown[f.path]) for f in findings),
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
    elif run.format in ("full", "concise"):
        if not args.quiet:
            report += _summary(findings, len(files), unsafe)
        if args.show_fixes and args.fix:  # asked for: kept under -q too
            report += _show_fixes(fixed_by)
        elif fixed and not args.quiet:
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
        ("target-version", ".".join(map(str, run.target_version or config.target_version or ())) or "-"),
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
        _use_torch_version(run, config)
        for path in files:
            if path == "-":
                continue
            if path.endswith(".ipynb"):
                total += _add_noqa_notebook(run, config, path, select, ignore)
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


def _add_noqa_notebook(run: Run, config, path: str, select, ignore) -> int:
    """``--add-noqa`` in a notebook's code cells (linted as one program, as ``check`` lints
    them; outputs and metadata kept, :func:`devlint.notebook.fix`): the comments added."""
    from . import noqa, notebook
    from .fix import write_atomic

    def add(text: str) -> tuple[str, int]:
        findings = [f for f in check_source(text.encode(), path[: -len(".ipynb")] + ".py", select, ignore)
                    if f.code != PARSE_ERROR and not _per_file_dropped(replace(f, path=path), config)]
        new, added = noqa.add(text, findings)
        if added and noqa.apply(findings, new):
            print(f"devlint: warning: {display_path(path)}: could not place # noqa comments that silence "
                  "every finding; left unchanged", file=sys.stderr)
            return text, 0
        return new, added

    try:
        data = read_file(path)
    except OSError:
        return 0
    new, added, _ = notebook.fix(data, add)
    if not added:
        return 0
    try:
        write_atomic(path, new)
    except OSError as exc:
        print(f"devlint: warning: {display_path(path)}: could not write: {exc}; left unchanged", file=sys.stderr)
        return 0
    return added


def _watch(run: Run) -> int:
    """``--watch``: check, then check again whenever a file under the paths changes."""
    from .watch import changes

    paths = run.args.paths or ["."]
    while True:
        if sys.stdout.isatty():  # a terminal: each pass on a clean screen, as ruff's watch mode
            print("\x1b[2J\x1b[H", end="", flush=True)
        stamp = time.strftime("%H:%M:%S")
        print(f"[devlint --watch] {stamp} checking {' '.join(paths)}", file=sys.stderr, flush=True)
        try:
            sources.forget()  # fresh source lines and settings on every pass
            run = Run(run.args)
            check_once(run)
        except UsageError as exc:
            print(f"devlint: error: {exc}", file=sys.stderr)
        sys.stdout.flush()
        print("[devlint --watch] waiting for changes (Ctrl-C to stop)", file=sys.stderr, flush=True)
        changes(paths)


def run_check(args: argparse.Namespace) -> int:
    """``devlint check`` with the parsed command line ``args``: the exit code (0 no findings,
    1 findings, 2 a usage error, printed as one line)."""
    try:
        run = Run(args)
        _set_torch_version(run)
        if args.watch:
            return _watch(run)
        return check_once(run)
    except UsageError as exc:
        print(f"devlint: error: {exc}", file=sys.stderr)
        return 2


def _target(value: str) -> tuple[int, int]:
    from .syntax import parse_target

    try:
        return parse_target(value)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _set_torch_version(run: Run) -> None:
    """Tell the rules the oldest torch to support (``--torch-version`` or the
    configuration of the first path): the environment carries it to worker processes."""
    from . import settings

    from . import syntax

    first = (run.args.paths or ["."])[0]
    version = run.torch_version
    if version is None:
        version = run.config(first).torch_version
    settings.set_torch_version(version)
    syntax.set_target_version(run.target_version or run.config(first).target_version)


def _use_torch_version(run: Run, config) -> None:
    """The torch-version of the files of one configuration: ``--torch-version``, else that
    configuration's own (a key like every other: per file, not from the first path)."""
    from . import settings

    from . import syntax

    settings.set_torch_version(run.torch_version or config.torch_version)
    syntax.set_target_version(run.target_version or config.target_version)  # and the oldest Python
