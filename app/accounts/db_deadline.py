"""Database work with a deadline: a hung database costs a caller seconds, never its request.

A database that accepts connections but does not answer (a stalled network path, a frozen
server) is the one fault no driver timeout covers: the kernel still acknowledges every byte,
so TCP timeouts never fire, and ``statement_timeout`` lives on the server that is not
answering. So every lookup a request or a background task waits on runs in a thread of its
own (a greenlet under gunicorn's gevent workers) inside its own app context, and the caller
waits for it at most ``DB_TIMEOUT_MS``. A job that overruns is left to finish or fail on its
own (its connection goes back to the pool, or is discarded, when the database answers or the
socket dies); the caller gets ``DatabaseTimeoutError`` at once, which is answered like any other
database failure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from app.metrics.common import DATABASE_ERRORS

R = TypeVar("R")


class DatabaseTimeoutError(SQLAlchemyError):
    """The database did not answer within the deadline."""


class _Outcome(Generic[R]):
    """What a job returned or raised, and when it did."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: R | None = None
        self.error: BaseException | None = None


class DatabaseGuard:
    """Runs database jobs in their own app context, each waited on for at most a deadline."""

    def __init__(
        self, context: Callable[[], AbstractContextManager[object]], timeout_s: float
    ) -> None:
        self._context = context
        self.timeout_s = timeout_s

    def __call__(self, job: Callable[[], R], name: str = "probboard-db") -> R:
        """``job()``'s result, or ``DatabaseTimeoutError`` when it has not finished in time."""
        outcome: _Outcome[R] = _Outcome()

        def run() -> None:
            try:
                with self._context():
                    outcome.value = job()
            except BaseException as exc:  # handed to the caller, who decides
                outcome.error = exc
            finally:
                outcome.done.set()

        threading.Thread(target=run, name=name, daemon=True).start()
        if not outcome.done.wait(self.timeout_s):
            DATABASE_ERRORS.labels("timeout").inc()
            raise DatabaseTimeoutError(f"no answer from the database within {self.timeout_s:g} s")
        if outcome.error is not None:
            if isinstance(outcome.error, SQLAlchemyError):
                DATABASE_ERRORS.labels("error").inc()
            raise outcome.error
        return outcome.value  # type: ignore[return-value]  # set when error is None

    def background(self, job: Callable[[], object], name: str = "probboard-db") -> None:
        """Run ``job`` in its own thread and app context without waiting for it."""

        def run() -> None:
            with self._context():
                job()

        threading.Thread(target=run, name=name, daemon=True).start()
