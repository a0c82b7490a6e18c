"""devlint's pytest plugin (entry point ``pytest11``: ``devlint``): one test per training step.

    # test_training.py
    from devlint.runtime import assert_step_ok

    def test_step_runs_everywhere():
        assert_step_ok(make_step())          # or the fixture: def test_x(devlint_check): ...

:func:`assert_step_ok` runs :func:`devlint.runtime.check_step` and fails the test with the
whole report when it is not ok. A failing check also writes the HTML report
(:mod:`devlint.runtime.report_html`, when matplotlib is installed) and attaches it to the
test: its path ends the failure message, is a ``devlint_report`` user property (JUnit XML's
``<property>``), and a "devlint report" section of the test's report. The plugin module
imports torch only when the helper or the fixture is used, so installing devlint never slows
down or breaks a project's pytest.
"""

from __future__ import annotations

import os
import re
import tempfile

try:
    import pytest
except ImportError:  # pragma: no cover - the helper works without pytest
    pytest = None

__all__ = ["assert_step_ok", "devlint_check", "report_dir"]

#: The HTML pages written for failing checks of the test running now, by test id.
_ATTACHED: dict[str, list[str]] = {}


def report_dir() -> str:
    """Where failing checks' HTML reports go: ``$DEVLINT_REPORT_DIR``, else
    ``<temp dir>/devlint-reports``; created when missing."""
    folder = os.environ.get("DEVLINT_REPORT_DIR") or os.path.join(tempfile.gettempdir(), "devlint-reports")
    os.makedirs(folder, exist_ok=True)
    return folder


def _attach_html(report) -> str:
    """Write ``report``'s HTML page for the running test; one line saying where (or why not)."""
    try:
        from .report_html import MissingExtra, write
    except ImportError:  # pragma: no cover
        return ""
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", test.split("::", 1)[-1] or "check")[:80]
    path = os.path.join(report_dir(), f"{stem}-{os.getpid()}-{len(_ATTACHED.get(test, ()))}.html")
    try:
        write(report, path)
    except MissingExtra:
        return "HTML report: not written (pip install matplotlib, devlint's [report] extra)"
    except OSError as exc:
        return f"HTML report: not written ({exc.strerror or exc})"
    _ATTACHED.setdefault(test, []).append(path)
    return f"HTML report: {path}"


def assert_step_ok(step, devices=None, modes=None, tolerances=None, seed: int = 0):
    """Check ``step`` (a :class:`devlint.runtime.TrainingStep`) and return the
    :class:`devlint.runtime.Report`; raise ``AssertionError`` carrying the report's text
    (and the path of its HTML page, see the module docs) unless it is ok. Arguments as
    :func:`devlint.runtime.check_step`."""
    from .runs import check_step

    report = check_step(step, devices=devices, modes=modes, tolerances=tolerances, seed=seed)
    if not report.ok:
        text = str(report)
        where = _attach_html(report)
        if where:
            text += "\n" + where
        if pytest is not None:
            pytest.fail(text, pytrace=False)
        raise AssertionError("\n" + text)
    return report


if pytest is not None:

    @pytest.fixture
    def devlint_check():
        """The :func:`assert_step_ok` helper, as a fixture."""
        return assert_step_ok

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(item, call):
        """Attach the HTML reports written while this test ran to its report."""
        outcome = yield
        paths = _ATTACHED.pop(item.nodeid, None)
        if paths:
            rep = outcome.get_result()
            for path in paths:
                item.user_properties.append(("devlint_report", path))
                rep.user_properties.append(("devlint_report", path))
                rep.sections.append(("devlint report", path))
