"""devlint's pytest plugin (entry point ``pytest11``: ``devlint``): one test per training step.

    # test_training.py
    from devlint.runtime import assert_step_ok

    def test_step_runs_everywhere():
        assert_step_ok(make_step())          # or the fixture: def test_x(devlint_check): ...

:func:`assert_step_ok` runs :func:`devlint.runtime.check_step` and fails the test with the
whole report when it is not ok. The plugin module imports torch only when the helper or the
fixture is used, so installing devlint never slows down or breaks a project's pytest.
"""

from __future__ import annotations

try:
    import pytest
except ImportError:  # pragma: no cover - the helper works without pytest
    pytest = None

__all__ = ["assert_step_ok", "devlint_check"]


def assert_step_ok(step, devices=None, modes=None, tolerances=None, seed: int = 0):
    """Check ``step`` (a :class:`devlint.runtime.TrainingStep`) and return the
    :class:`devlint.runtime.Report`; raise ``AssertionError`` carrying the report's text
    unless it is ok. Arguments as :func:`devlint.runtime.check_step`."""
    from .runs import check_step

    report = check_step(step, devices=devices, modes=modes, tolerances=tolerances, seed=seed)
    if not report.ok:
        if pytest is not None:
            pytest.fail(str(report), pytrace=False)
        raise AssertionError("\n" + str(report))
    return report


if pytest is not None:

    @pytest.fixture
    def devlint_check():
        """The :func:`assert_step_ok` helper, as a fixture."""
        return assert_step_ok
