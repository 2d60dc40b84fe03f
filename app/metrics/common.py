"""Series both the web process and the refresher have: Redis and database trouble."""

from __future__ import annotations

from prometheus_client import Counter, Gauge

REDIS_ERRORS = Counter(
    "probboard_redis_errors_total",
    "Redis calls that failed (connection, timeout, server error), by component.",
    ["component"],
)
REDIS_FALLBACK = Gauge(
    "probboard_redis_fallback",
    "1 while a component answers from its local stand-in because Redis is away.",
    ["component"],
    multiprocess_mode="livemax",
)
DATABASE_ERRORS = Counter(
    "probboard_database_errors_total",
    "Database operations that failed (error) or did not answer in time (timeout).",
    ["kind"],
)


def component_label(what: str) -> str:
    """A label value from a description: "rate-limit storage" → rate_limit_storage."""
    return "_".join("".join(c if c.isalnum() else " " for c in what.lower()).split())
