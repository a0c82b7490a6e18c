"""Both front ends over ``fixtures/lint`` give exactly the marked findings, and the same ones."""

from __future__ import annotations

from conftest import LINT_FIXTURES, ROOT, devlint, flake8, mismatches, parse_findings

FILES = sorted(LINT_FIXTURES.rglob("*.py"))


def _check(found):
    problems = []
    for path in FILES:
        problems += [f"{path.name}: {p}" for p in mismatches(path.read_text(), found.get(path.name, set()))]
    assert problems == []


def test_fixture_folder_has_flagged_and_clean_files():
    names = [p.name for p in FILES]
    assert any(n.endswith("_ok.py") for n in names) and any("expect:" in p.read_text() for p in FILES)


def test_cli_reports_exactly_the_marked_findings():
    result = devlint("check", str(LINT_FIXTURES))
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    _check(parse_findings(result.stdout))


def test_flake8_reports_exactly_the_marked_findings():
    result = flake8("--select=DEV", str(LINT_FIXTURES))
    assert result.returncode == 1, result.stderr
    _check(parse_findings(result.stdout))


def test_front_ends_agree_on_every_finding():
    folder = str(LINT_FIXTURES.relative_to(ROOT))  # the CLI prints paths relative to the current folder
    cli = devlint("check", folder, cwd=ROOT).stdout
    f8 = flake8("--select=DEV", "--format=%(path)s:%(row)d:%(col)d: %(code)s %(text)s", folder, cwd=ROOT).stdout
    # the CLI marks fixable findings with [*] after the code, as ruff does; flake8 has no such marker
    strip = lambda out: sorted(line.replace(" [*] ", " ") for line in out.splitlines() if ": DEV" in line)  # noqa: E731
    assert strip(cli) == strip(f8) and strip(cli)
