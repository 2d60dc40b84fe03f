"""The gevent worker's quit (SIGINT, SIGQUIT): once, and never an exit after the worker's loop.

gunicorn's gevent worker moves a quit into a greenlet that turns ``alive`` off, waits 0.1 s,
then calls ``sys.exit(0)``. The worker's loop sees ``alive`` off on its own and may end
first; a greenlet still waiting then woke inside the interpreter's shutdown and printed
"Exception ignored in: threading ... SystemExit" after Ctrl-C (CI, 2026-11-29). The worker is
gunicorn's own class, built as its arbiter builds it; the quit's wait is set to 0 so that the
order of events, not real time, decides.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import gevent
import pytest
from gunicorn.config import Config

from app.gunicorn_worker import JsonErrorGeventWorker


@pytest.fixture
def worker() -> Iterator[JsonErrorGeventWorker]:
    """A worker as the arbiter builds it before fork: no sockets, no app yet."""
    made = JsonErrorGeventWorker(1, os.getpid(), [], None, 30, Config(), None)
    made.quit_wait_s = 0.0
    try:
        yield made
    finally:
        made.tmp.close()


def _start_quit(worker: JsonErrorGeventWorker) -> None:
    worker.handle_quit(signal.SIGINT, None)
    gevent.sleep(0)  # the quit's greenlet starts: alive off, then its wait


def test_a_quit_while_the_worker_loop_runs_exits_the_worker(worker: JsonErrorGeventWorker) -> None:
    _start_quit(worker)

    assert worker.alive is False
    with pytest.raises(SystemExit):
        gevent.sleep(0.2)  # the wait ends with the loop still running: gunicorn's quick exit


def test_a_quit_whose_wait_outlives_the_worker_loop_ends_quietly(
    worker: JsonErrorGeventWorker,
) -> None:
    _start_quit(worker)
    worker.run()  # alive is off: the loop ends at once, before the quit's wait is over

    try:
        gevent.sleep(0.2)
    except SystemExit:
        pytest.fail("the quit exited after the worker's loop had ended")
    assert worker.alive is False


def test_a_second_quit_signal_starts_no_second_exit(worker: JsonErrorGeventWorker) -> None:
    _start_quit(worker)
    worker.run()
    worker.handle_quit(signal.SIGQUIT, None)  # the master's, after the terminal's SIGINT

    try:
        gevent.sleep(0.2)
    except SystemExit:
        pytest.fail("a second quit signal exited again")
