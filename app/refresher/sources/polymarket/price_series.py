"""A price series that judges every point before believing it (docs/reliability.md).

A value is judged against the believed point nearest in time (``PriceSeries.offer``): a move
larger than real markets make (``JUMP_BASE`` plus ``JUMP_PER_ROOT_S`` per square root of the
seconds between them) is held as suspect, so a stray value never becomes the price, the price
to beat or the volatility. A suspect run that stays self-consistent for ``RELEARN_S`` is
believed (the old level was the wrong one, or the world moved; the old points stay in the
history); a TWAP series with nothing believed yet is judged by the spot, and a spot series
with nothing believed yet waits for ``CONFIRM_POINTS`` points that agree. A spot with a
witness (the exchange price, the TWAP reports: ``witness.py``) is judged by it instead.

The believed points themselves live in ``points.Points``; the volatility is measured on them
(``app.refresher.volatility``), cached until a point arrives.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from app.refresher import volatility
from app.refresher.sources.polymarket.points import Points
from app.refresher.sources.polymarket.series_volatility import SeriesVolatility
from app.refresher.sources.polymarket.twap_witness import TwapWitness
from app.refresher.sources.polymarket.witness import MAX_PENDING, ExchangeWitness, Verdict

SPOT_HISTORY_S = 4 * 3600  # hours of spot: the volatility's horizon scale is measured on it
TWAP_HISTORY_S = 1800
# The largest move believed between two points dt seconds apart, in log terms:
# JUMP_BASE + JUMP_PER_ROOT_S * sqrt(dt). Set from BTC's real 1 s data (docs/reliability.md):
# about 3x its largest real second (34 bp), far below a stray price.
JUMP_BASE = 0.01
JUMP_PER_ROOT_S = 0.002
CONFIRM_POINTS = 2  # a series with nothing believed yet: this many points that agree
# Without a witness only (a TWAP series; a spot whose exchange price is silent, or a tape
# recorded without it): a self-consistent suspect run this long (and RELEARN_POINTS) is
# believed. With a witness, persistence proves nothing: the witness decides.
RELEARN_S = 30.0
RELEARN_POINTS = 10
MOVE_UNIT_MS = 300_000  # ``Market.window_move`` is a coin's bound per five minutes


def allowed_move(dt_ms: int, base: float = JUMP_BASE) -> float:
    """The largest |log return| believed between two points ``dt_ms`` apart (``base``: the
    market's own, ``Market.jump_base``)."""
    return base + JUMP_PER_ROOT_S * math.sqrt(max(1.0, abs(dt_ms) / 1000))


def each_seconds_price(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """The first and the last point of each second, in time order: the price in force at
    every whole second (the settlement, the price to beat), each second's last (the means)
    and no gap longer than the points had (the coverage checks) are all among them. A
    snapshot denser than the feed's 1 Hz (megabytes of points) then costs its seconds, not
    its points: the feed's reader judges each point kept, and is held as long."""
    kept: dict[int, list[tuple[int, float]]] = {}  # second -> [its first, its last]
    for point in sorted(points):
        ends = kept.setdefault(point[0] // 1000, [point, point])
        if point[0] > ends[1][0]:  # a repeated stamp keeps its first value
            ends[1] = point
    return [
        p for first, last in kept.values() for p in ((first,) if first == last else (first, last))
    ]


def reachable(
    nearest: tuple[int, float] | None, ts_ms: int, value: float, window_move: float | None
) -> bool:
    """Whether ``value`` at ``ts_ms`` is within ``window_move`` (per square root of the
    windows between them, at least one) of the believed point ``nearest`` in time: a level no
    window reaches is never believed (None: no bound, or nothing believed yet)."""
    if window_move is None or nearest is None:
        return True
    reference_ms, reference = nearest
    windows = max(1.0, abs(ts_ms - reference_ms) / MOVE_UNIT_MS)
    return abs(math.log(value / reference)) <= window_move * math.sqrt(windows)


def _agrees(reference: tuple[int, float], point: tuple[int, float], base: float) -> bool:
    return abs(math.log(point[1] / reference[1])) <= allowed_move(point[0] - reference[0], base)


class PriceSeries(Points):
    """Recent points of one topic, each judged before it is believed; the volatility."""

    def __init__(
        self,
        history_s: int = TWAP_HISTORY_S,
        clock: Callable[[], float] = time.time,
        anchor: PriceSeries | None = None,
        jump_base: float = JUMP_BASE,
        witness: ExchangeWitness | None = None,
        window_move: float | None = None,
        twaps: tuple[TwapWitness, ...] = (),
        windows: tuple[int, ...] = (),
    ) -> None:
        super().__init__(history_s, clock)
        self._volatility = SeriesVolatility(windows)  # served windows: the factors' horizons
        self._jump_base = jump_base
        # The spot's: the exchange price that must agree with each point (``witness.py``),
        # the TWAP reports a point waits for while the exchange has no verdict (so no row
        # shows it before they can contradict its mean), and the largest move believed
        # within a window, whatever agrees with it.
        self._witness = witness
        self._twaps = twaps
        self._window_move = window_move
        self._pending: list[tuple[int, float]] = []  # waiting for the witness's verdict
        # The newest point the witness contradicted (stamp, why), until a believed point at
        # or after its stamp: the row is stale meanwhile (its price disagrees).
        self._doubt: tuple[int, str] | None = None
        # Another series of the same asset (a TWAP's: the spot) that judges this one's points
        # while it has nothing believed of its own.
        self._anchor = anchor
        # Points not believed yet: a suspect run, or the first points of an empty series.
        self._run: list[tuple[int, float]] = []
        self._merging = 0  # history snapshots being merged now (``merge``, point by point)

    def _add(self, ts_ms: int, value: float) -> None:
        """Believe a point (the caller holds the lock): it ends a doubt as old as it."""
        if self._doubt is not None and ts_ms >= self._doubt[0]:
            self._doubt = None  # a believed point as new as the contradicted one
        super()._add(ts_ms, value)

    def merge(self, points: list[tuple[int, float]]) -> list[str]:
        """Merge a history snapshot, each second's price judged as by ``offer``; a gap it
        spans is repaired. Returns the suspect kinds of the points not believed."""
        with self._lock:
            self._merging += 1
        try:
            verdicts = [self.offer(ts_ms, value) for ts_ms, value in each_seconds_price(points)]
        finally:
            with self._lock:
                self._merging -= 1
        suspect = [kind for kind in verdicts if kind is not None]
        if points:
            self._repair(min(t for t, _ in points), max(t for t, _ in points))
        return suspect

    def offer(self, ts_ms: int, value: float) -> str | None:
        """Take a point if it is believable. Returns None when taken (or waiting: for the
        witness's verdict, or in a series with nothing believed yet for ``CONFIRM_POINTS``
        that agree), else the suspect kind: ``old_stamp`` (stamped before the history kept,
        as a stamp in seconds is), ``out_of_range`` (a level no window reaches),
        ``disagrees`` (the witness contradicts it) or ``jump`` (judged alone: too far from
        the believed point nearest in time, ``allowed_move``)."""
        with self._lock:
            if self._times and ts_ms < self._times[-1] - self._history_ms:
                # Named in the row until a believed point comes: never dropped silently.
                kept_h = self._history_ms / 3_600_000
                why = f"a point stamped {ts_ms} ms is older than the {kept_h:g} h kept (seconds?)"
                if self._doubt is None or self._doubt[0] <= ts_ms:
                    self._doubt = (ts_ms, why)
                return "old_stamp"
        with self._lock:
            nearest = self._nearest(ts_ms)
        if not reachable(nearest, ts_ms, value, self._window_move):
            return "out_of_range"
        verdict, why = self._verdict(ts_ms, value)
        if verdict is Verdict.WAIT:
            with self._lock:
                self._pending = [*self._pending[1 - MAX_PENDING :], (ts_ms, value)]
            return None
        if verdict is Verdict.DISAGREES:
            with self._lock:
                self._run = []  # never part of a run that persistence could make believed
                if self._doubt is None or ts_ms >= self._doubt[0]:
                    self._doubt = (ts_ms, why)
            return "disagrees"
        if verdict is Verdict.AGREES:
            with self._lock:
                self._run = []
                self._add(ts_ms, value)
                same_since, frozen = self._same_since, self._frozen
            believed = [(ts_ms, value)]
            suspect = None
            if not frozen and self._witness is not None and self._witness.moved_since(same_since):
                with self._lock:
                    self._frozen = self._same_since == same_since
        else:
            suspect, believed = self._offer_alone(ts_ms, value)
        for point in believed:
            if self._witness is not None:
                self._witness.learn(*point)
            for twap in self._twaps:
                twap.learn_point(*point, self.in_second)
        return suspect

    def _verdict(self, ts_ms: int, value: float) -> tuple[Verdict, str]:
        """Three views of one price: the spot point, the exchange price and the spot the TWAP
        reports give (``TwapWitness.exact_verdict``). The exchange's agreement believes the
        point; its agreement with its own recent past only (TRAILS: a spot behind a fast
        move) believes it unless the reports, where they speak, disagree (reports that arrive
        but cannot judge yet are waited for; silent ones leave the lenience); where it disagrees,
        the reports decide: they confirm the spot (two against
        one: the exchange is outvoted) or not; where it has no verdict, the reports alone.
        WAIT while the reports that would decide have not reached the point's second."""
        verdict, why = self._witness.judge(ts_ms, value) if self._witness else (Verdict.NONE, "")
        if verdict in (Verdict.WAIT, Verdict.AGREES):
            return verdict, why
        exact, exact_why = self._exact_verdict(ts_ms, value)
        if verdict is Verdict.TRAILS:  # the exchange's lenience, unless the reports object
            if exact is not Verdict.NONE:
                return exact, exact_why
            # Reports that arrive but cannot give a second's spot yet (their shift not
            # learnt) soon will: the point waits for them. Believed on the trail alone, a lie
            # inside a move was shown fresh (a drift's first second, seconds after a start).
            if any(t.learning for t in self._twaps):
                return Verdict.WAIT, ""
            return Verdict.AGREES, ""
        if verdict is Verdict.NONE:
            if exact is Verdict.NONE:
                reports = [t.newest_ms() for t in self._twaps if t.judging]
                if reports and all(r is None or r < ts_ms for r in reports):
                    return Verdict.WAIT, ""
            return exact, exact_why
        if exact is Verdict.WAIT:
            return exact, ""
        if exact is Verdict.AGREES:
            assert self._witness is not None
            self._witness.outvoted(ts_ms)
            return exact, ""
        return verdict, why

    def _exact_verdict(self, ts_ms: int, value: float) -> tuple[Verdict, str]:
        """The TWAP topics' exact verdicts together: any that disagrees, else any that
        agrees, else WAIT while one waits for a report of the point's second."""
        found = [t.exact_verdict(ts_ms, value, self.in_second) for t in self._twaps]
        for wanted in (Verdict.DISAGREES, Verdict.AGREES):
            for verdict, why in found:
                if verdict is wanted:
                    return verdict, why
        # Only WAIT and NONE are left: one that waits for the point's second may yet speak.
        if any(v is Verdict.WAIT for v, _ in found):
            return Verdict.WAIT, ""
        return Verdict.NONE, ""

    def settle(self) -> list[str]:
        """A witness has spoken for more seconds: judge the points waiting for one (those
        still ahead of it wait on). Returns the suspect kinds found."""
        with self._lock:
            waiting, self._pending = self._pending, []
        kinds = (self.offer(ts_ms, value) for ts_ms, value in waiting)
        return [kind for kind in kinds if kind is not None]

    def waiting(self) -> int:
        """How many points wait for a witness's verdict (``settle`` judges them)."""
        with self._lock:
            return len(self._pending)

    def doubt(self) -> str | None:
        """Why the newest point offered is not believed, when the witness contradicted it
        (None when a believed point has come since)."""
        with self._lock:
            return self._doubt[1] if self._doubt else None

    def _offer_alone(self, ts_ms: int, value: float) -> tuple[str | None, list[tuple[int, float]]]:
        """``offer`` without a witness: within ``allowed_move`` of the believed point nearest
        in time, else a suspect run believed after ``RELEARN_S`` (or, in a series with
        nothing believed yet, ``CONFIRM_POINTS`` that agree). Returns (the suspect kind or
        None, the points believed)."""
        point = (ts_ms, value)
        # The anchor (another series' lock, taken before ours: never nested) only matters
        # while this series has nothing believed of its own.
        anchored = None
        if self._anchor is not None and not self._times:
            anchored = self._anchor.nearest(ts_ms)
        with self._lock:
            reference = self._nearest(ts_ms) or anchored
            if reference is not None and _agrees(reference, point, self._jump_base):
                self._run = []  # a believed point ends a suspect run
                believed = [point]
            else:
                run = self._run
                joins = (
                    bool(run) and run[-1][0] != ts_ms and _agrees(run[-1], point, self._jump_base)
                )
                displaced = bool(run) and not joins
                self._run = run = [*run, point] if joins else [point]
                cold = reference is None and len(run) >= CONFIRM_POINTS
                relearn = len(run) >= RELEARN_POINTS and run[-1][0] - run[0][0] >= (
                    RELEARN_S * 1000
                )
                if not (cold or relearn):
                    return (None if reference is None and not displaced else "jump"), []
                believed, self._run = run, []
            for believed_point in believed:
                self._add(*believed_point)
        return None, believed

    def volatility(self) -> volatility.Volatility | None:
        """The volatility estimate of this series (``series_volatility``: cached until a
        point arrives, the whole history's measures at most every ``SCALE_EVERY_S``, none
        kept from a snapshot half merged)."""
        with self._lock:
            fresh, estimate = self._volatility.cached(self._version)
            if fresh:
                return estimate
            version, partial = self._version, self._merging > 0
            whole = self._volatility.points(self._times, self._values)
        return self._volatility.measure(whole, version, partial, self._lock)
