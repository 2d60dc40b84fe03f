"""The time budget end to end: a parallel pytest run whose offenders are run again alone.

A generated folder holds a conftest that installs the suite's budget plugin and three tests:
one within the budget, one over it only in its first run (as a test stretched by the load of
its neighbours would be), and one over it every time. Sleeping is the subject here: the
budget is about durations.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFTEST = """
from tests.support import budget


def pytest_addoption(parser):
    budget.add_option(parser)


def pytest_configure(config):
    budget.register(config)
"""
TESTS = """
import time
from pathlib import Path

FIRST_RUN = Path(__file__).with_name("ran-once")


def test_quick():
    assert True


def test_slow_only_under_load():
    if not FIRST_RUN.exists():
        FIRST_RUN.touch()
        time.sleep(2.3)


def test_slow_every_time():
    time.sleep(2.3)
"""


def test_only_what_is_over_the_budget_alone_too_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_generated.py").write_text(TESTS)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "-p", "no:randomly", "--budget=enforce"],
        cwd=tmp_path,
        # Only xdist besides the budget (the suite's other plugins took seconds to load in
        # each of the three pytest runs, and are no part of this).
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
            "PYTEST_PLUGINS": "xdist.plugin",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = done.stdout
    assert "3 passed" in out, out
    assert done.returncode == 1, out  # every test passed; the budget failed the run
    checked, _, standing = out.partition("over budget in the parallel run, run again alone:")[
        2
    ].partition("over budget (")
    assert "test_generated.py::test_slow_only_under_load" in checked, out
    assert "test_generated.py::test_slow_every_time" in checked, out
    assert "test_generated.py::test_slow_every_time" in standing, out
    assert "test_slow_only_under_load" not in standing, out
    assert "test_quick" not in checked + standing, out
