"""The refresher's publish path beside the alerts (``bench.alerts``, issue 51 point 6).

A listener of the board channel in the bench's process measures each refresher board's build
(its ``ts``) to its arrival here: the build, the publish and Redis's fan-out, the path a web
worker's stream waits on. So that the alerts program has the same work in every run (the
simulated path crosses the bench's lines only now and then), the listener also publishes, in
both phases, a pair of boards behind every ``every``-th refresher board: that board itself
with BTC 5m's P(up) at 30, then at 60, which re-arms and crosses the 1,000 firing lines
(every other row as the refresher made it, so no other line is re-armed). Their seqs are the
refresher board's plus 1 and 2: newer than it and older than its next, half a second later
(a seq not above the last one is refused, and a subscriber drops such a board).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.board.snapshot import Snapshot, dumps
from app.bus.redis_bus import RedisBoardBus


def set_p_up(document: dict[str, Any], p_up: float, others: float | None = None) -> None:
    """Set BTC 5m's P(up) in a board ``document`` to ``p_up``; every other row's to
    ``others`` when given."""
    for item in document["items"]:
        pct = p_up if item["symbol"] == "BTC" and "window" not in item else others
        if pct is not None:
            item["p_up_pct"], item["p_down_pct"] = pct, round(100 - pct, 2)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (nearest rank)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


LATE_MS = 200.0  # a board this late gets no pair behind it (the next comes 500 ms after it)


class PublishLags:
    """Each refresher board's build to its arrival (ms), and the bench's load behind it."""

    def __init__(self, bus: RedisBoardBus, every: int = 4) -> None:
        self.ms: list[float] = []
        self.loading = True  # publish the bench's pairs (off for the rounds)
        self.pairs = 0
        self._bus, self._every = bus, every
        self._ours: set[int] = set()
        self._seen = 0

    def __call__(self, snapshot: Snapshot) -> None:
        """A board of the channel (the bus's subscriber thread)."""
        if snapshot.seq in self._ours:
            return
        lag_ms = time.time() * 1000 - snapshot.ts_ms
        self.ms.append(lag_ms)
        self._seen += 1
        # A board come late (a stalled thread, a catch-up) may have the next one behind it:
        # a pair after it could be older than the newest, and dropped by every subscriber.
        if self.loading and self._seen % self._every == 0 and lag_ms < LATE_MS:
            document = snapshot.document
            for step, p_up in ((1, 30.0), (2, 60.0)):
                document["seq"] = snapshot.seq + step
                set_p_up(document, p_up)
                self._ours.add(document["seq"])
                self._bus.publish(dumps(document))
            self.pairs += 1

    def window(self, boards_total: Callable[[], float], seconds: float) -> dict[str, float]:
        """Over ``seconds``: the refresher boards' build-to-arrival p50 and max (ms: about 40
        boards, too few for a p99), its boards published (``boards_total``: its own counter)
        and received here, a second, and the bench's pairs sent."""
        before, pairs = boards_total(), self.pairs
        self.ms = []
        time.sleep(seconds)
        seen, boards = list(self.ms), boards_total() - before
        return {
            "p50_ms": round(statistics.median(seen), 2) if seen else math.nan,
            "max_ms": round(max(seen), 2) if seen else math.nan,
            "published_per_s": round(boards / seconds, 2),
            "received_per_s": round(len(seen) / seconds, 2),
            "changes": self.pairs - pairs,
        }
