"""The names an alert is made of (issue 51), shared by the alerts (``app.alerts``) and their
schemas (``app.schemas.alerts``), which import nothing of each other's folder."""

from __future__ import annotations

from dataclasses import dataclass

P_UP_ABOVE, P_UP_BELOW, EDGE_ABOVE, STALE = "p_up_above", "p_up_below", "edge_above", "stale"
CONDITIONS = (P_UP_ABOVE, P_UP_BELOW, EDGE_ABOVE, STALE)
SIDES = ("up", "down")
FORMATS = ("json", "slack", "discord")
ACTIVE, PAUSED = "active", "paused"
# A delivery's life: queued, then delivered (a 2xx), failed for good (its attempts spent, or
# a refused target), or expired (its moment passed before a call got through).
PENDING, DELIVERED, FAILED, EXPIRED = "pending", "delivered", "failed", "expired"


@dataclass(frozen=True)
class AlertSpec:
    """What an alert is, as its owner asked for it (checked): where to call, which market's
    board of which window kind, its condition, level and side, and the body's format."""

    url: str
    symbol: str
    window: str
    condition: str
    level: float | None
    side: str | None
    format: str
