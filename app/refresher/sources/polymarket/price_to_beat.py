"""A window's price to beat: latched from the settlement stream, else from its fallbacks.

The settlement stream comes first (``latch``): a spot window's price to beat is the spot in
force at T0, a TWAP window's the TWAP report at T0, each taken only once the points around T0
have arrived with no hole between them, so a point missed in a gap is never latched past. A
TWAP report is believed when the spot's own mean over the lookback witnesses it; a TWAP topic
that is silent (or has a hole at T0) is replaced by that mean. A spot window whose stream
gives nothing ``FALLBACK_AFTER_S`` after T0 asks the site's open price (at most every
``SITE_RETRY_S``), then takes Gamma's ``priceToBeat``; both are believed only when the spot's
points around T0 witness them (``price_to_beat_witness.py``). A refused value keeps the row
stale with the reason until a believable one comes (docs/price-to-beat.md).

A window that began before the refresher heard its stream (a restart, the standby taking the
lease) takes the value a refresher latched and kept (``latch_journal.py``); with none kept
its row has no P(up) until the next window (the log says why).

The site and the journal are asked from the source's upkeep thread (``upkeep``), never while a
row is built.
"""

from __future__ import annotations

import logging
import math
from datetime import UTC, datetime

import httpx

from app.markets import Market, Span
from app.metrics.refresher import UPSTREAM_ERRORS
from app.refresher import clocks
from app.refresher.model import TWAP
from app.refresher.sources.polymarket.discovery import LiveWindow
from app.refresher.sources.polymarket.doubts import Doubts
from app.refresher.sources.polymarket.latch_journal import JOURNAL_VIA, LatchJournal
from app.refresher.sources.polymarket.points import MAX_GAP_MS
from app.refresher.sources.polymarket.price_series import PriceSeries
from app.refresher.sources.polymarket.price_to_beat_witness import (
    sigma_of,
    spot_witness,
    topic_agrees_now,
    twap_witness,
)
from app.refresher.sources.polymarket.rtds import SPOT_KEY, TOPICS, TWAP_KEYS, RtdsFeed
from app.refresher.sources.polymarket.suspects import Suspects

log = logging.getLogger(__name__)

SITE_RETRY_S = 2.0  # while a spot window has no price to beat: one cheap request every 2 s
FALLBACK_AFTER_S = 5.0  # no settlement point at T0 this long after it: try the fallbacks
# A TWAP report for T0 has been seen 2.6-3.1 s late, after the one for T0 + 1 s (issue 37):
# the first report after T0 stands in for it only once T0's has had this long to come.
T0_REPORT_WAIT_S = 8.0
JOURNAL_RETRY_S = 10.0  # a window without a price to beat asks the journal this often
SPOT_MEAN = "mean"
SITE_VIA = "site:crypto-price"
PRICE_TO_BEAT = "price_to_beat"  # the kind of a window's doubt about its price to beat


def _say_why_none(window: LiveWindow, spot: PriceSeries, journaled: bool) -> None:
    """Log once per window why it can have no price to beat: the stream is heard (the
    history snapshot is in, or the first point came) yet nothing from before T0 and its
    lookback. No opinion rather than a wrong one: the row shows null P(up), its books and
    price keep their own ages (a row is stale only for inputs that are)."""
    if window.unknowable_said or spot.latest() is None:
        return  # said once already, or nothing heard yet (the history may still come)
    lookback = (window.market.lookback_s if window.market else None) or 0
    if spot.around((window.t0 - lookback) * 1000)[0]:
        return
    window.unknowable_said = True
    log.warning(
        "%s %s window %d: no price to beat (the stream was first heard after the window "
        "began, and %s): no P(up) until the next window",
        window.coin.symbol,
        window.span.name,
        window.t0,
        "none was kept" if journaled else "no journal without Redis",
    )


def _bracketed(
    series: PriceSeries, before: tuple[int, float] | None, after: tuple[int, float] | None
) -> bool:
    """Points on both sides of an instant, close enough and with no reconnect between them
    (a point there may have been missed: wait for the back-fill)."""
    if before is None or after is None or after[0] - before[0] > MAX_GAP_MS:
        return False
    return not series.has_gap(before[0], after[0])


class PriceToBeat:
    """Finds, judges and sets the price to beat of each window."""

    def __init__(
        self,
        rtds: RtdsFeed,
        http: httpx.Client,
        site_url: str,
        suspects: Suspects,
        doubts: Doubts,
        journal: LatchJournal | None = None,
    ) -> None:
        self._rtds = rtds
        self.journal = journal
        self._http = http
        self._site_url = site_url.rstrip("/")
        self._suspects = suspects  # Gamma's and the site's answers
        self._doubts = doubts

    def _spot(self, coin: Market) -> PriceSeries:
        return self._rtds.of(coin)[SPOT_KEY]

    @staticmethod
    def wants_lookup(window: LiveWindow, now: float) -> bool:
        """A spot market still without a price to beat once the fallbacks are due: Gamma's
        ``priceToBeat`` comes late (or came unusable), so ask again."""
        return (
            window.market is not None
            and window.market.rule != TWAP
            and window.price_to_beat is None
            and now - window.t0 > FALLBACK_AFTER_S
        )

    def latch(self, window: LiveWindow, now: float) -> None:
        """Latch the price to beat from the settlement stream once it is known for sure:
        the points around T0 have arrived with no hole between them (a back-fill after a
        reconnect counts), so a point missed in a gap can never be latched past."""
        market = window.market
        if window.final or market is None:
            return
        t0_ms = window.t0 * 1000
        spot = self._spot(window.coin)
        if market.rule != TWAP:
            before, after = spot.around(t0_ms)
            if before is not None and (before[0] == t0_ms or _bracketed(spot, before, after)):
                self.set(window, before[1], f"rtds:{TOPICS[SPOT_KEY]}", True)
            return
        lookback = market.lookback_s
        if lookback is None:
            return
        key = TWAP_KEYS.get(lookback)
        if key is not None:
            series = self._rtds.of(window.coin)[key]
            before, after = series.around(t0_ms - 1)  # after: the first report at or after T0
            stands_in = now - window.t0 >= T0_REPORT_WAIT_S and _bracketed(series, before, after)
            if after is not None and (after[0] == t0_ms or stands_in):
                self._latch_twap_report(window, series, after, lookback, now)
                return
        # The TWAP topic is silent (or has a hole at T0): the same average from the spot.
        if window.price_to_beat is None and now - window.t0 >= FALLBACK_AFTER_S:
            self._set_spot_mean(window, lookback, False)

    def _set_spot_mean(self, window: LiveWindow, lookback: int, final: bool) -> None:
        """The price to beat from our own mean of the spot over [T0 - L, T0], when the spot
        has no hole there."""
        t0_ms = window.t0 * 1000
        start_ms = t0_ms - lookback * 1000
        spot = self._spot(window.coin)
        if spot.covered(start_ms, t0_ms, MAX_GAP_MS):
            mean = spot.mean(start_ms, t0_ms)
            if mean is not None:
                via = f"rtds:{TOPICS[SPOT_KEY]}:{SPOT_MEAN}{lookback}s"
                self.set(window, mean, via, final)

    def _latch_twap_report(
        self,
        window: LiveWindow,
        series: PriceSeries,
        report: tuple[int, float],
        lookback: int,
        now: float,
    ) -> None:
        """The TWAP report at T0 is the price to beat when the spot's own mean over the
        lookback witnesses it. One that disagrees is refused and the row is stale with the
        reason, until the topic's latest report agrees with the spot again: then the report
        at T0 was the topic's passing error and the spot's mean is the price to beat (the
        settlement stream's own points, which the model rests on anyway)."""
        via = f"rtds:{TOPICS[TWAP_KEYS[lookback]]}"
        spot, t0_ms = self._spot(window.coin), window.t0 * 1000
        sigma = sigma_of(spot.volatility())
        if (report[1], via) not in window.refused:
            witness = twap_witness(spot, t0_ms, lookback, sigma, MAX_GAP_MS)
            if witness is None:
                # The spot's history may come after its live points (and after the TWAP's):
                # nothing before the lookback yet, wait for it; nor are the points up to T0
                # all in during the first seconds.
                unheard = spot.around(t0_ms - lookback * 1000)[0] is None
                latest = spot.latest()
                behind = latest is None or latest[0] < t0_ms - MAX_GAP_MS
                if unheard or (behind and now - window.t0 < FALLBACK_AFTER_S):
                    return
                # A hole in the spot's lookback: the seconds it has, a coarse witness; with
                # none, the report was judged as a point only (docs/price-to-beat.md).
                witness = twap_witness(spot, t0_ms, lookback, sigma, MAX_GAP_MS, partial=True)
            if witness is None or witness.admits(report[1]):
                self.set(window, report[1], via, True)
                return
            window.refused.add((report[1], via))
            reason = witness.reason(report[1], via)
            self._doubts.doubt(window, PRICE_TO_BEAT, reason, feed="rtds")
        if topic_agrees_now(spot, series, t0_ms, lookback, sigma, MAX_GAP_MS):
            self._set_spot_mean(window, lookback, True)

    def _plausible(self, window: LiveWindow, value: float, via: str) -> bool | None:
        """A price to beat from outside the settlement stream is believed only when it is a
        finite price the spot's own points around T0 witness (``price_to_beat_witness.py``);
        None while they cannot (no point near T0 yet). A refused one makes the row stale
        with the reason until a believable one comes."""
        if not (math.isfinite(value) and value > 0):
            self._suspects.note("out_of_range", f"price to beat {value!r} from {via}")
            # Counted as out_of_range just above, not again as disagrees: no ``doubt``.
            window.doubts[PRICE_TO_BEAT] = f"price to beat {value!r} from {via} is no price"
            return False
        spot = self._spot(window.coin)
        witness = spot_witness(spot, window.t0 * 1000, sigma_of(spot.volatility()))
        if witness is None:
            return None
        if witness.admits(value):
            return True
        self._doubts.doubt(window, PRICE_TO_BEAT, witness.reason(value, via))
        return False

    def set(self, window: LiveWindow, value: float, via: str, final: bool) -> None:
        """Take ``value`` (from ``via``) as ``window``'s price to beat: one from outside the
        settlement stream only once its witness admits it; ``final``: the settlement's own
        value, which nothing replaces."""
        if window.final and not final:
            return  # the settlement's own value (latched meanwhile) stays
        candidate = (value, via)
        if candidate in window.refused:
            return
        known = (window.price_to_beat, window.price_to_beat_via)
        if candidate != known and not via.startswith(("rtds:", JOURNAL_VIA)):
            verdict = self._plausible(window, value, via)
            if verdict is False:
                window.refused.add(candidate)  # judged once: not counted again on every tick
            if not verdict:
                return
        if window.price_to_beat_via != via:
            log.info("price to beat %.2f from %s", value, via)
        if candidate != known and via.startswith("rtds:") and self.journal is not None:
            self.journal.note(window, value, via)  # queued: written by the upkeep thread
        window.price_to_beat, window.price_to_beat_via, window.final = value, via, final
        self._doubts.clear(window, PRICE_TO_BEAT)  # a believed one ends a refusal's doubt

    def upkeep(self, window: LiveWindow, now: float) -> None:
        """The settlement stream's price to beat, else (a spot window, from
        ``FALLBACK_AFTER_S`` after T0) the site's open price, else Gamma's."""
        self.latch(window, now)
        market = window.market
        if market is not None and window.price_to_beat is None:
            self._recall(window, now)
        if market is None or window.price_to_beat is not None or market.rule == TWAP:
            # A TWAP market's price to beat is the TWAP at T0: the report, or our own mean of
            # the spot over [T0 - L, T0] (both in ``latch``), else none and no P(up). The
            # site's open price is the SPOT at T0 (a public study; twapEnabled=true changes
            # nothing we can verify) and Gamma's priceToBeat may be either: neither is used,
            # the site is not even asked (docs/price-to-beat.md).
            return
        if now - window.t0 > FALLBACK_AFTER_S and (
            clocks.monotonic() - window.site_tried_at >= SITE_RETRY_S
        ):
            window.site_tried_at = clocks.monotonic()
            opened = self._site_open_price(window.coin, window.t0, window.span)
            if opened is not None:  # a failed retry does not forget an answer
                window.site_open = opened
        site = (window.site_open, SITE_VIA)
        if window.site_open is not None and site not in window.refused:
            # The site's answer is offered again at each upkeep until its witness can judge
            # it: Gamma's is never taken while it waits (only once it is refused).
            self.set(window, window.site_open, SITE_VIA, False)
            return
        if market.price_to_beat is not None:
            self.set(window, market.price_to_beat, "gamma", False)

    def _recall(self, window: LiveWindow, now: float) -> None:
        """Once the stream has had its chance (``T0_REPORT_WAIT_S``), the value a refresher
        kept for this window; with none, and no point of ours from before T0, the log says
        why the row has no P(up) (once per window)."""
        if now - window.t0 < T0_REPORT_WAIT_S:
            return
        mono = clocks.monotonic()
        if self.journal is not None and mono - window.journal_asked_at >= JOURNAL_RETRY_S:
            window.journal_asked_at = mono
            kept = self.journal.recall(window)
            if kept is not None:  # the stream's own value, replaced if the stream latches later
                self.set(window, kept[0], kept[1], False)
                return
        _say_why_none(window, self._spot(window.coin), self.journal is not None)

    def flush(self) -> None:
        """Write the latched prices to beat to the journal (the upkeep thread)."""
        if self.journal is not None:
            self.journal.flush()

    def close(self) -> None:
        """Write what is queued (at most the journal's timeout), then drop its connections."""
        if self.journal is not None:
            try:
                self.journal.close()
            except Exception:
                log.exception("closing the price-to-beat journal failed")

    def _site_open_price(self, coin: Market, t0: int, span: Span) -> float | None:
        """The site's open price of a SPOT market's window (a TWAP market's is never asked,
        see ``upkeep``), under the span's own ``variant``."""

        def iso(t: int) -> str:
            return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

        params = {
            "symbol": coin.symbol,
            "eventStartTime": iso(t0),
            "variant": span.site_variant,
            "endDate": iso(span.end(t0)),
        }
        try:
            response = self._http.get(f"{self._site_url}/api/crypto/crypto-price", params=params)
            payload = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            UPSTREAM_ERRORS.labels("site").inc()
            log.debug("crypto-price lookup failed: %s", exc)
            return None
        value = payload.get("openPrice") if isinstance(payload, dict) else None
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)  # judged (finite, near the spot) in ``set``
        return None
