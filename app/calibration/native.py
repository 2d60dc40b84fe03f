"""Blocking C calls kept off a gevent worker's hub: SQLite's queries in a native thread.

A gevent worker serves every request from one OS thread. PostgreSQL's driver (psycopg 3)
waits cooperatively under gevent, but SQLite's queries are C calls that hold that thread
until they end: scoring a large record would stop ``/latest`` and the streams meanwhile.
In a native thread of gevent's pool the query runs beside the hub (the sqlite3 module lets
go of the GIL while SQLite works), and the calling greenlet waits for it.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TypeVar

R = TypeVar("R")


def off_the_hub(job: Callable[[], R]) -> R:
    """``job()`` in a native thread when gevent has patched threads (else right here)."""
    monkey = sys.modules.get("gevent.monkey")
    if monkey is None or not monkey.is_module_patched("threading"):
        return job()
    import gevent

    result: R = gevent.get_hub().threadpool.apply(job)
    return result
