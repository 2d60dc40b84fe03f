"""The periods the track record is scored over: ``24h``, ``7d``, ``30d`` and ``all``.

A period holds the windows that started within its span before now (``all``: every one).
Named here, below the endpoint (``app.api.periods`` parses the parameter) and the schema.
"""

from __future__ import annotations

DEFAULT = "all"
# Each name's span in seconds (None: no start).
SPANS: dict[str, int | None] = {"24h": 86_400, "7d": 7 * 86_400, "30d": 30 * 86_400, "all": None}


def since(period: str, now: float) -> int | None:
    """The first window start (unix seconds) ``period`` scores at ``now``; None for all."""
    span = SPANS[period]
    return None if span is None else int(now) - span
