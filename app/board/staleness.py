"""Staleness: how old data is, and the ok / warn / danger level that follows from it."""

from __future__ import annotations

OK = "ok"
WARN = "warn"
DANGER = "danger"


def latency_level(age_ms: int | None, stale_ms: int, severe_ms: int) -> str:
    """``ok`` up to ``stale_ms``, ``warn`` up to ``severe_ms``, ``danger`` beyond or unknown."""
    if age_ms is None or age_ms > severe_ms:
        return DANGER
    if age_ms > stale_ms:
        return WARN
    return OK
