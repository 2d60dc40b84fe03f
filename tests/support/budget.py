"""The suite's time budget, checked from pytest's own durations (a plugin: tests/conftest.py).

Every phase pytest times (setup, call, teardown) of a unit test must take at most
``UNIT_S``, of an integration test at most ``INTEGRATION_S``. The first setup and the
last teardown of each module on each worker are allowed ``INTEGRATION_S``: they start and
stop the servers the module and the session share (a redis-server, a database migrated
once, a module's gunicorn), which the tests between them use for free. A test over its
budget is an offender unless it is named in ``EXCEPTIONS`` with its reason.

A phase over its budget in the parallel run is checked alone: its test runs again with no
other test beside it (one pytest, ``-n 0``, after the parallel run, the offenders one after
another) and the budget judges that run's phases. Four workers on
two cores, with the slowest integration tests starting servers beside them, stretch a 1 s
test to 2-3 s now and then; the budget is about what a test costs, not about the load its
neighbours put on the machine, and a budget that failed on the neighbours would be a flaky
test. Only ``CHECKED_ALONE_MAX`` tests are run again (a run with more offenders than that has
a real problem): the rest stand as offenders.

At the end of the run the summary prints the run's wall time, the 15 slowest phases, the
phases checked alone and the offenders (``make test`` and ``.ci/run`` included).
``--budget=enforce`` (or ``PYTEST_BUDGET=enforce``) makes an offender fail the run; so does
CI (``CI=true``, as ``.ci/run`` runs) once ``CI_ENFORCES``. Elsewhere the default is
``report``: a developer's machine, busy with other work, only hears about them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

UNIT_S = 2.0
INTEGRATION_S = 30.0
SLOWEST_SHOWN = 15
CHECKED_ALONE_MAX = 40  # offenders of the parallel run run again alone, at most
CHECK_ALONE_TIMEOUT_S = 600.0  # the run that runs them again (their servers included)
CI_ENFORCES = True  # under CI=true an offender fails the run; elsewhere it is reported
MODES = ("enforce", "report", "off")
# nodeid (or the start of one) -> why it may take longer than its budget. Keep it short:
# each entry is a test whose subject is a duration longer than the budget, or real work
# that cannot be shared (docs/tests.md lists them with their times).
EXCEPTIONS: dict[str, str] = {
    "tests/integration/faults/test_honest_moves.py::test_a_slower_feeds_smoothing_is_learnt"
    "_live_and_keeps_the_row_fresh": (
        "the smoothing is learnt live on 40 believed seconds after the warm-up (the subject),"
        " then three moves are watched: about 60 s"
    ),
    "tests/integration/test_deploy.py::": (
        "each deploy installs a real release (a venv from the bundle's wheels, about 20 s"
        " apiece here); installing, switching, rolling back and rewriting the env file are"
        " the subject, one to three installs a test"
    ),
    "tests/integration/faults/test_database.py::test_stream_housekeeping_never_waits_on_a_hung"
    "_database": (
        "the 45 s hang outlasts a stream lease (15 s) twice and four key re-checks (10 s):"
        " the defect it guards let leases lapse about 40 s into a hang"
    ),
    "tests/integration/faults/test_upstream_values.py::test_another_coins_price_under_btc_usd"
    "_for_40_s": (
        "the wrong price must outlast RELEARN_S (30 s), after which a steady run is believed"
        " without a witness: the fault's length is the subject"
    ),
    "tests/integration/faults/test_witness_votes.py::test_a_de_pegged_exchange_is_outvoted"
    "_then_its_new_basis_learnt": (
        "the exchange must be outvoted for 10 s before its basis is forgotten, then learn 20"
        " points of the new one: the fault's length is the subject"
    ),
    "tests/integration/faults/test_upstream_values.py::test_a_spot_drifting_away_at_3_bp_a"
    "_second": (
        "the drift must outlast RELEARN_S (30 s), after which a steady run is believed without"
        " a witness: the fault's length is the subject"
    ),
}


@dataclass(frozen=True)
class Phase:
    """One timed phase of one test."""

    nodeid: str
    when: str
    seconds: float
    worker: str = "main"  # the xdist worker that ran it ("main": no workers)

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


def shared_phases(phases: list[Phase]) -> set[tuple[str, str]]:
    """The (nodeid, phase) of each module's first setup and last teardown on each worker."""
    first: dict[tuple[str, str], str] = {}
    last: dict[tuple[str, str], str] = {}
    for phase in phases:
        where = (phase.module, phase.worker)
        if phase.when == "setup":
            first.setdefault(where, phase.nodeid)
        elif phase.when == "teardown":
            last[where] = phase.nodeid
    return {(n, "setup") for n in first.values()} | {(n, "teardown") for n in last.values()}


def run_alone(nodeids: list[str], root: Path) -> list[Phase] | None:
    """The phases of the tests ``nodeids`` run again one after another in a fresh pytest
    (no worker, no test beside them), or None when that run recorded nothing (it hung, or
    could not start)."""
    with tempfile.TemporaryDirectory() as folder:
        record = Path(folder) / "phases.json"
        command = [
            *(sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:randomly"),
            *("--budget=off", f"--budget-record={record}", *nodeids),
        ]
        try:
            subprocess.run(
                command,
                cwd=root,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                timeout=CHECK_ALONE_TIMEOUT_S,
                check=False,
            )
            found = json.loads(record.read_text())
        except (subprocess.TimeoutExpired, OSError, ValueError):
            return None
    return [Phase(**phase) for phase in found]


def checked_alone(
    found: list[Phase], rerun: Callable[[list[str]], list[Phase] | None]
) -> tuple[list[Phase], list[tuple[Phase, Phase | None]]]:
    """Run the tests of ``found`` (offenders of a parallel run) again alone with ``rerun``
    (one run, one test after another), at most ``CHECKED_ALONE_MAX`` of them; returns the
    offenders that stand and, for each phase checked, its time alone (None: that run
    recorded no such phase)."""
    nodeids = list(dict.fromkeys(phase.nodeid for phase in found))[:CHECKED_ALONE_MAX]
    phases = (rerun(nodeids) or []) if nodeids else []
    over = offenders(phases, shared_phases(phases))
    standing: list[Phase] = []
    checked: list[tuple[Phase, Phase | None]] = []
    for phase in found:
        if phase.nodeid not in nodeids:
            standing.append(phase)
            continue
        again = next((p for p in phases if (p.nodeid, p.when) == (phase.nodeid, phase.when)), None)
        checked.append((phase, again))
        if again is None or again in over:
            standing.append(phase)
    return standing, checked


class Phases:
    """Collects every phase's duration (on the xdist controller, from every worker)."""

    def __init__(self) -> None:
        self.phases: list[Phase] = []

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """Keep each phase's duration and the worker that ran it."""
        node = getattr(report, "node", None)  # xdist: the worker that ran it
        worker = str(node.gateway.id) if node is not None else "main"
        self.phases.append(Phase(report.nodeid, report.when, report.duration, worker))


class Budget(Phases):
    """Judges the run's phases against the budget."""

    def __init__(self, mode: str, root: Path) -> None:
        super().__init__()
        self.mode = mode
        self.root = root
        self.started = time.monotonic()
        self._verdict: tuple[list[Phase], list[tuple[Phase, Phase | None]]] | None = None

    def verdict(self) -> tuple[list[Phase], list[tuple[Phase, Phase | None]]]:
        """The offenders that stand, and the phases checked alone (computed once)."""
        if self._verdict is None:
            found = offenders(self.phases, shared_phases(self.phases))
            if any(p.worker != "main" for p in self.phases):  # parallel: checked alone
                self._verdict = checked_alone(found, lambda ids: run_alone(ids, self.root))
            else:
                self._verdict = (found, [])
        return self._verdict

    @pytest.hookimpl
    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        """The run's wall time, its slowest phases, the phases checked alone and the
        offenders."""
        write = terminalreporter.write_line
        terminalreporter.section("time budget")
        write(f"suite wall time: {time.monotonic() - self.started:.1f} s")
        write(f"the {SLOWEST_SHOWN} slowest phases:")
        for phase in sorted(self.phases, key=lambda p: -p.seconds)[:SLOWEST_SHOWN]:
            write(f"  {phase.seconds:7.2f} s  {phase.when:<8} {phase.nodeid}")
        standing, checked = self.verdict()
        if checked:
            write("over budget in the parallel run, run again alone:")
            for phase, again in checked:
                alone = f"{again.seconds:7.2f} s" if again else "   none  "
                write(f"  {phase.seconds:7.2f} s -> {alone}  {phase.when:<8} {phase.nodeid}")
        limits = f"unit {UNIT_S} s, integration {INTEGRATION_S} s"
        if not standing:
            write(f"every phase within its budget ({limits})")
            return
        write(f"over budget ({limits}; mode {self.mode}):")
        for phase in standing:
            write(f"  {phase.seconds:7.2f} s  {phase.when:<8} {phase.nodeid}")

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        """Fail the run on an offender when the budget is enforced."""
        if self.mode != "enforce" or session.exitstatus != pytest.ExitCode.OK:
            return
        if self.verdict()[0]:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED


class Recorder(Phases):
    """Writes every phase's duration to a JSON file (``--budget-record``: a test run again
    alone reports its phases to the run that asked)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path

    @pytest.hookimpl
    def pytest_sessionfinish(self) -> None:
        """Write them down."""
        self.path.write_text(json.dumps([asdict(p) for p in self.phases]))


def add_option(parser: pytest.Parser) -> None:
    """``--budget=enforce|report|off`` (default: ``PYTEST_BUDGET``, else see ``mode_of``),
    and ``--budget-record=PATH``."""
    parser.addoption(
        "--budget",
        choices=MODES,
        default=None,
        help="the per-test time budget (tests/support/budget.py): enforce, report or off",
    )
    parser.addoption(
        "--budget-record",
        default=None,
        help="write every phase's duration to this JSON file (a test checked alone)",
    )


def mode_of(option: str | None, environ: Mapping[str, str]) -> str:
    """The budget's mode: the option, else ``PYTEST_BUDGET``, else enforce under CI
    (``CI=true``) once ``CI_ENFORCES``, else report."""
    default = "enforce" if CI_ENFORCES and environ.get("CI") == "true" else "report"
    return option or environ.get("PYTEST_BUDGET") or default


def register(config: pytest.Config) -> None:
    """Install the budget on the process that reports (the xdist controller, or the only one)."""
    if hasattr(config, "workerinput"):
        return  # an xdist worker: its reports reach the controller, which checks them
    mode = mode_of(config.getoption("--budget"), os.environ)
    if mode not in MODES:
        raise pytest.UsageError(f"PYTEST_BUDGET: expected one of {', '.join(MODES)}, got {mode!r}")
    record = config.getoption("--budget-record")
    if record:
        config.pluginmanager.register(Recorder(Path(record)), "probboard-budget-record")
    if mode != "off":
        config.pluginmanager.register(Budget(mode, config.rootpath), "probboard-budget")
