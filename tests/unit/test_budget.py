"""The suite's time budget (tests/support/budget.py) finds what is over it, and only that."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from tests.support import budget
from tests.support.budget import Phase, offenders

UNIT = "tests/unit/x/test_a.py::test_one"
INTEGRATION = "tests/integration/test_b.py::test_two"


def test_each_folder_has_its_budget_per_phase() -> None:
    """A unit phase over 2 s and an integration phase over 30 s are found; at the limit not."""
    phases = [
        Phase(UNIT, "call", 2.0),
        Phase(UNIT, "teardown", 2.01),
        Phase(INTEGRATION, "call", 30.0),
        Phase(INTEGRATION, "setup", 30.5),
    ]
    assert offenders(phases, set()) == [phases[1], phases[3]]


def test_a_modules_first_setup_and_last_teardown_may_start_and_stop_its_servers() -> None:
    """Those two phases get the integration budget; the test's own call does not."""
    phases = [Phase(UNIT, "setup", 12.0), Phase(UNIT, "call", 3.0), Phase(UNIT, "teardown", 31.0)]
    shared = {(UNIT, "setup"), (UNIT, "teardown")}
    assert offenders(phases, shared) == [phases[1], phases[2]]


def test_a_named_exception_is_excused_parameters_and_all() -> None:
    """An exception names a test (or its start); its parametrized cases are excused too."""
    excused = "tests/integration/test_b.py::test_two"
    phases = [Phase(excused + "[a]", "call", 90.0), Phase(UNIT, "call", 9.0)]
    saved = dict(budget.EXCEPTIONS)
    budget.EXCEPTIONS[excused] = "why"
    try:
        assert offenders(phases, set()) == [phases[1]]
    finally:
        budget.EXCEPTIONS.clear()
        budget.EXCEPTIONS.update(saved)


def test_ci_enforces_the_budget_and_a_developer_hears_of_it() -> None:
    """Under CI (once it enforces) an offender fails the run; elsewhere it is reported;
    both can be overridden."""
    assert budget.mode_of(None, {"CI": "true"}) == ("enforce" if budget.CI_ENFORCES else "report")
    saved = budget.CI_ENFORCES
    budget.CI_ENFORCES = True
    try:
        assert budget.mode_of(None, {"CI": "true"}) == "enforce"
        assert budget.mode_of(None, {"CI": "false"}) == "report"
    finally:
        budget.CI_ENFORCES = saved
    assert budget.mode_of(None, {}) == "report"
    assert budget.mode_of(None, {"CI": "true", "PYTEST_BUDGET": "report"}) == "report"
    assert budget.mode_of("off", {"CI": "true", "PYTEST_BUDGET": "enforce"}) == "off"


def test_every_exception_names_a_test_that_exists_and_says_why() -> None:
    """An exception left behind by a renamed or deleted test would excuse nothing, or a
    newcomer with the same start: each names a file and, where given, a test in it."""
    root = Path(__file__).resolve().parents[2]
    for prefix, reason in budget.EXCEPTIONS.items():
        path, _, name = prefix.partition("::")
        source = (root / path).read_text()
        if name:
            assert re.search(rf"def {re.escape(name)}\b", source), prefix
        assert len(reason) > 40, f"{prefix}: say why it may take longer"


def test_each_modules_first_setup_and_last_teardown_on_each_worker_are_shared() -> None:
    """Per module and worker: the first setup and the last teardown, nothing else."""
    other = "tests/unit/x/test_a.py::test_two"
    phases = [
        Phase(UNIT, "setup", 1.0, "gw0"),
        Phase(other, "setup", 1.0, "gw1"),  # its own first there
        Phase(UNIT, "teardown", 1.0, "gw0"),
        Phase(other, "teardown", 1.0, "gw0"),  # the module's last there
    ]
    assert budget.shared_phases(phases) == {
        (UNIT, "setup"),
        (other, "setup"),
        (other, "teardown"),
    }
    one_worker = [dataclasses.replace(phase, worker="main") for phase in phases]
    assert budget.shared_phases(one_worker) == {(UNIT, "setup"), (other, "teardown")}


def test_an_offender_of_the_parallel_run_stands_only_if_it_is_over_alone_too() -> None:
    """A phase over its budget under load is run again alone: within the budget there, it
    is cleared; over it, or not recorded at all (the test hung), it stands."""
    slow, loaded, hung = (f"tests/unit/x/test_a.py::test_{n}" for n in ("slow", "loaded", "hung"))
    alone = {
        slow: [Phase(slow, "setup", 0.1), Phase(slow, "call", 2.5), Phase(slow, "teardown", 0)],
        loaded: [
            Phase(loaded, "setup", 0),
            Phase(loaded, "call", 0.9),
            Phase(loaded, "teardown", 0),
        ],
        hung: None,
    }
    asked: list[list[str]] = []

    def rerun(nodeids: list[str]) -> list[Phase]:
        asked.append(nodeids)
        return [phase for n in nodeids for phase in alone[n] or []]

    found = [Phase(slow, "call", 4.0), Phase(loaded, "call", 3.0), Phase(hung, "call", 5.0)]
    standing, checked = budget.checked_alone(found, rerun)
    assert standing == [found[0], found[2]]
    assert checked == [(found[0], alone[slow][1]), (found[1], alone[loaded][1]), (found[2], None)]  # type: ignore[index]
    assert asked == [[slow, loaded, hung]]  # one run, one test after another


def test_a_setup_run_alone_may_start_what_its_module_shares() -> None:
    """Alone, a test's setup is its module's first: a module fixture's work is allowed the
    integration budget there, as in the parallel run."""
    test = "tests/unit/x/test_a.py::test_late"
    phases = [Phase(test, "setup", 9.0), Phase(test, "call", 0.5), Phase(test, "teardown", 0.1)]
    standing, _ = budget.checked_alone([Phase(test, "setup", 12.0)], lambda _: phases)
    assert standing == []
    # A run that recorded nothing (it hung): the offender stands.
    standing, _ = budget.checked_alone([Phase(test, "setup", 12.0)], lambda _: None)
    assert standing == [Phase(test, "setup", 12.0)]


def test_no_more_than_the_cap_are_run_again() -> None:
    """Past ``CHECKED_ALONE_MAX`` tests the rest stand unchecked: a run with that many
    offenders has a real problem, and running them all again would double it."""
    found = [Phase(f"{UNIT}{i}", "call", 3.0) for i in range(budget.CHECKED_ALONE_MAX + 2)]
    asked: list[str] = []

    def rerun(nodeids: list[str]) -> list[Phase]:
        asked.extend(nodeids)
        return [Phase(nodeid, "call", 0.5) for nodeid in nodeids]

    standing, checked = budget.checked_alone(found, rerun)
    assert len(asked) == len(checked) == budget.CHECKED_ALONE_MAX
    assert standing == found[budget.CHECKED_ALONE_MAX :]
