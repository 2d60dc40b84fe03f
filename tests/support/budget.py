"""The suite's time budget, checked from pytest's own durations (a plugin: tests/conftest.py).

Every phase pytest times (setup, call, teardown) of a unit test must take at most
``UNIT_S``, of an integration test at most ``INTEGRATION_S``. The first setup and the
last teardown of each module on each worker are allowed ``INTEGRATION_S``: they start and
stop the servers the module and the session share (a redis-server, a database migrated
once, a module's gunicorn), which the tests between them use for free. A test over its
budget is an offender unless it is named in ``EXCEPTIONS`` with its reason.

At the end of the run the summary prints the run's wall time, the 15 slowest phases and the
offenders (``make test`` and ``.ci/run`` included). ``--budget=enforce`` (or
``PYTEST_BUDGET=enforce``) makes an offender fail the run; the default only reports them,
because the suite does not yet keep its budget (docs/tests.md lists what is over it). Once it
does, CI enforces it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

import pytest

UNIT_S = 2.0
INTEGRATION_S = 30.0
SLOWEST_SHOWN = 15
MODES = ("enforce", "report", "off")
# nodeid (or the start of one) -> why it may take longer than its budget. Keep it short.
EXCEPTIONS: dict[str, str] = {}


@dataclass(frozen=True)
class Phase:
    """One timed phase of one test."""

    nodeid: str
    when: str
    seconds: float

    @property
    def module(self) -> str:
        """The test's file."""
        return self.nodeid.split("::", 1)[0]


def budget_of(nodeid: str) -> float:
    """The budget of one phase of the test ``nodeid``: by its folder."""
    return INTEGRATION_S if nodeid.startswith("tests/integration/") else UNIT_S


def excused(nodeid: str) -> str | None:
    """The reason ``nodeid`` may take longer, if it is one of the exceptions."""
    for prefix, reason in EXCEPTIONS.items():
        if nodeid.startswith(prefix):
            return reason
    return None


def offenders(phases: list[Phase], shared: set[tuple[str, str]]) -> list[Phase]:
    """The phases over their budget, exceptions aside. ``shared`` holds the (nodeid, phase)
    of each module's first setup and last teardown on a worker, which are allowed the
    integration budget (they start and stop what the module shares)."""
    found = []
    for phase in phases:
        if excused(phase.nodeid) is not None:
            continue
        limit = budget_of(phase.nodeid)
        if (phase.nodeid, phase.when) in shared:
            limit = max(limit, INTEGRATION_S)
        if phase.seconds > limit:
            found.append(phase)
    return found


class Budget:
    """Collects every phase's duration (on the xdist controller, from every worker)."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.started = time.monotonic()
        self.phases: list[Phase] = []
        self._first_setup: dict[tuple[str, str], str] = {}  # (module, worker) -> nodeid
        self._last_teardown: dict[tuple[str, str], str] = {}

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each phase's duration; note each module's first setup and last teardown on
        each worker."""
        phase = Phase(report.nodeid, report.when, report.duration)
        self.phases.append(phase)
        node = getattr(report, "node", None)  # xdist: the worker that ran it
        where = (phase.module, str(node.gateway.id) if node is not None else "main")
        if report.when == "setup":
            self._first_setup.setdefault(where, report.nodeid)
        elif report.when == "teardown":
            self._last_teardown[where] = report.nodeid

    @property
    def shared(self) -> set[tuple[str, str]]:
        """The phases that start or stop what a module shares (see ``offenders``)."""
        return {(n, "setup") for n in self._first_setup.values()} | {
            (n, "teardown") for n in self._last_teardown.values()
        }

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The run's wall time, its slowest phases and its offenders."""
        write = terminalreporter.write_line
        terminalreporter.section("time budget")
        write(f"suite wall time: {time.monotonic() - self.started:.1f} s")
        write(f"the {SLOWEST_SHOWN} slowest phases:")
        for phase in sorted(self.phases, key=lambda p: -p.seconds)[:SLOWEST_SHOWN]:
            write(f"  {phase.seconds:7.2f} s  {phase.when:<8} {phase.nodeid}")
        found = offenders(self.phases, self.shared)
        if not found:
            write(f"every phase within its budget (unit {UNIT_S} s, integration {INTEGRATION_S} s)")
            return
        write(f"over budget (unit {UNIT_S} s, integration {INTEGRATION_S} s; mode {self.mode}):")
        for phase in found:
            write(f"  {phase.seconds:7.2f} s  {phase.when:<8} {phase.nodeid}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Fail the run on an offender when the budget is enforced."""
        over = self.mode == "enforce" and offenders(self.phases, self.shared)
        if over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


def add_option(parser: pytest.Parser) -> None:
    """``--budget=enforce|report|off`` (default: ``PYTEST_BUDGET``, else report)."""
    parser.addoption(
        "--budget",
        choices=MODES,
        default=None,
        help="the per-test time budget (tests/support/budget.py): enforce, report or off",
    )


def register(config: pytest.Config) -> None:
    """Install the budget on the process that reports (the xdist controller, or the only one)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its reports reach the controller, which checks them
    mode = config.getoption("--budget") or os.environ.get("PYTEST_BUDGET") or "report"
    if mode not in MODES:
        raise pytest.UsageError(f"PYTEST_BUDGET: expected one of {', '.join(MODES)}, got {mode!r}")
    if mode != "off":
        config.pluginmanager.register(Budget(mode), "probboard-budget")
