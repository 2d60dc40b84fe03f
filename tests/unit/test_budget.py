"""The suite's time budget (tests/support/budget.py) finds what is over it, and only that."""

from __future__ import annotations

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
