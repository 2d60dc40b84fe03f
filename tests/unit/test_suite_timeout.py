"""The suite's per-test timeout: a test that hangs fails, by name, and the run goes on.

pytest-timeout is configured in setup.cfg (``timeout``). A generated file with two hanging
tests (a busy loop and a wait on nothing) and one ordinary test is run by a pytest of its
own with a 0.5 s timeout (each hang lasts that long: nothing shorter is waited for), and
with pytest-timeout its only plugin: the others' start-up (hypothesis, schemathesis...) took
two of the test's five seconds and have no part in it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HANGING = """
import threading


def test_spins_forever():
    while True:
        pass


def test_waits_forever():
    threading.Event().wait()


def test_after_the_hangs():
    assert True
"""


def test_the_suite_has_a_default_per_test_timeout(pytestconfig: pytest.Config) -> None:
    """Every test of the suite runs under a timeout unless it sets its own."""
    configured = pytestconfig.getini("timeout")

    assert configured and float(configured) > 0, configured


def test_a_hanging_test_fails_with_its_name_and_the_run_goes_on(tmp_path: Path) -> None:
    """Figure: hanging tests reported as failed by timeout = 2 of 2; the test after them runs."""
    (tmp_path / "test_hangs.py").write_text(HANGING)
    only_timeout = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}

    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "pytest_timeout",
         "-o", "timeout=0.5", "--rootdir", str(tmp_path), str(tmp_path / "test_hangs.py")],
        cwd=tmp_path, env=only_timeout, capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    output = finished.stdout + finished.stderr
    assert finished.returncode == 1, output
    assert output.count("Timeout (>0.5s) from pytest-timeout") >= 2, output
    assert "FAILED test_hangs.py::test_spins_forever" in output, output
    assert "FAILED test_hangs.py::test_waits_forever" in output, output
    assert "2 failed, 1 passed" in output, output
