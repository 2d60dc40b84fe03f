"""A tape from CronosVirus00/polymarket-BTC5min-database (CC BY 4.0): the CLOB book of BTC
5-minute markets at every update (``market_data/*.parquet``: ``timestamp``, ``slug``,
``asset_id``, ``bids``, ``asks``, ``raw_data``), and the market's own calibration from it.

The tape holds what was received: each row's ``raw_data`` (a ``book`` message) as a
``clob-ws`` frame at the row's ``timestamp`` (the recording machine's clock), and for each
slug a Gamma answer (``FakeMarket.event()``) two minutes before the window. The data has no
BTC price, so a replay of this tape has no P(up) (every row is stale for want of a price).

What the data does not say, and how it is filled in:

- which token is Up. Most windows have one token recorded, some two (the second only for a
  few hundred updates). The Gamma answer names the token recorded most ``Up`` and the other
  one (or, when only one was recorded, a made-up id) ``Down``: a CONVENTION. The market's
  scores below do not depend on it (the Brier score and log loss of p against o equal those
  of 1 - p against 1 - o); its reliability table would be mirrored for windows where the
  convention is wrong.
- the outcome: not in the data. It is read from the market's book once the window has ended
  (``outcome_of``): the last book of a token received in the ``OUTCOME_WITHIN_S`` after the
  end, when it is one-sided at the extreme (a bid at 0.99 or more and no ask: that token won;
  an ask at 0.01 or less and no bid: it lost). Nothing else counts (no outcome for that
  window; both tokens saying different things: none either). It is the market's verdict
  once the end price is public, not the official resolution.
"""

from __future__ import annotations

import importlib
import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.fake_polymarket import SLUG_PREFIX, FakeMarket
from harness.real_data.binance import DOWN, GAMMA_AHEAD_S, UP, gamma_line, line
from harness.spans import WINDOW_S

COLUMNS = ["timestamp", "slug", "asset_id", "raw_data"]
OUTCOME_WITHIN_S = 10.0
WON_BID, LOST_ASK = 0.99, 0.01
GRACE_S = 2.0  # a checkpoint's book: the first at or after T - rem, within this (checkpoints.py)


class CronosError(RuntimeError):
    """The parquet files cannot be read (pyarrow missing, a broken file)."""


@dataclass(frozen=True)
class Row:
    """One recorded book."""

    t: float
    slug: str
    asset_id: str
    raw: str  # the message as received


def _parquet() -> Any:
    try:
        return importlib.import_module("pyarrow.parquet")
    except ImportError as exc:
        raise CronosError(
            "reading the Cronos parquet files needs pyarrow, which probboard does not "
            "install: pip install pyarrow"
        ) from exc


def read_rows(paths: Iterable[Path]) -> list[Row]:
    """Every row of the parquet files, in time order (the same row in two files once)."""
    parquet = _parquet()
    seen: set[tuple[float, str, str]] = set()
    rows: list[Row] = []
    for path in paths:
        try:
            table = parquet.read_table(path, columns=COLUMNS)
        except Exception as exc:  # pyarrow's own errors; the file is named either way
            raise CronosError(f"{path}: cannot be read ({exc})") from exc
        for item in table.to_pylist():
            key = (float(item["timestamp"]), str(item["asset_id"]), str(item["raw_data"]))
            if key in seen or not str(item["slug"]).startswith(SLUG_PREFIX):
                continue
            seen.add(key)
            rows.append(Row(key[0], str(item["slug"]), key[1], key[2]))
    rows.sort(key=lambda row: row.t)
    return rows


def window_start(slug: str) -> int:
    """``btc-updown-5m-<T0>`` -> T0."""
    return int(slug.removeprefix(SLUG_PREFIX))


def markets(rows: Iterable[Row]) -> dict[str, FakeMarket]:
    """Slug -> its market as the Gamma answer names it: the token recorded most is ``Up``
    (a convention: see the module), the condition id is the books' own."""
    counts: dict[str, Counter[str]] = defaultdict(Counter)
    conditions: dict[str, str] = {}
    for row in rows:
        counts[row.slug][row.asset_id] += 1
        if row.slug not in conditions:
            condition = json.loads(row.raw).get("market")
            if isinstance(condition, str):
                conditions[row.slug] = condition
    found = {}
    for slug, seen in sorted(counts.items()):
        ranked = [token for token, _ in seen.most_common()]
        t0 = window_start(slug)
        market = FakeMarket(t0, up_token=ranked[0], condition=conditions.get(slug, ""))
        if len(ranked) > 1:
            market.down_token = ranked[1]
        found[slug] = market
    return found


def lines(rows: list[Row]) -> list[dict[str, Any]]:
    """The tape: a ``clob-ws`` connect, each slug's Gamma answer, every book as received."""
    if not rows:
        return []
    out = []
    for market in markets(rows).values():
        out.append(gamma_line(market.window_start - GAMMA_AHEAD_S, market))
    first = min([rows[0].t, *(item["t"] for item in out)])
    out.append(line(first - 0.001, "clob-ws", event="connect"))
    out.extend(line(row.t, "clob-ws", frame=row.raw) for row in rows)
    out.sort(key=lambda item: float(item["t"]))
    return out


def _top(book: dict[str, Any]) -> tuple[float | None, float | None]:
    """(best bid, best ask): max bid and min ask, whatever the order of the arrays."""

    def prices(side: Any) -> list[float]:
        found = []
        for level in side if isinstance(side, list) else []:
            try:
                price, size = float(level["price"]), float(level["size"])
            except (KeyError, TypeError, ValueError):
                continue
            if math.isfinite(price) and size > 0:
                found.append(price)
        return found

    bids, asks = prices(book.get("bids")), prices(book.get("asks"))
    return (max(bids) if bids else None), (min(asks) if asks else None)


@dataclass
class MarketWindow:
    """One window of a books-only tape: its tokens, and every book of them (t, bid, ask)."""

    slug: str
    window_start: int
    up_token: str
    down_token: str
    books: dict[str, list[tuple[float, float | None, float | None]]] = field(
        default_factory=lambda: defaultdict(list)
    )

    @property
    def end(self) -> int:
        """The window's end (Unix seconds)."""
        return self.window_start + WINDOW_S


def windows_of(tape: Iterable[dict[str, Any]]) -> dict[str, MarketWindow]:
    """The windows of a tape's Gamma answers, with the ``book`` messages of their tokens."""
    found: dict[str, MarketWindow] = {}
    by_token: dict[str, MarketWindow] = {}
    for item in tape:
        frame = item.get("frame")
        if item.get("event") is not None or not isinstance(frame, str):
            continue
        if item["src"] == "gamma":
            market = json.loads(frame)["markets"][0]
            tokens = dict(
                zip(json.loads(market["outcomes"]), json.loads(market["clobTokenIds"]), strict=True)
            )
            slug = str(market["slug"])
            window = MarketWindow(slug, window_start(slug), tokens["Up"], tokens["Down"])
            found[slug] = window
            by_token[window.up_token] = by_token[window.down_token] = window
        elif item["src"] == "clob-ws":
            message = json.loads(frame)
            for book in message if isinstance(message, list) else [message]:
                if not isinstance(book, dict) or book.get("event_type") != "book":
                    continue
                owner = by_token.get(str(book.get("asset_id")))
                if owner is not None:
                    bid, ask = _top(book)
                    owner.books[str(book["asset_id"])].append((float(item["t"]), bid, ask))
    return found


def outcome_of(window: MarketWindow) -> str | None:
    """``up`` / ``down`` from the books after the end (see the module), or None."""
    verdicts = set()
    for token, is_up in ((window.up_token, True), (window.down_token, False)):
        after = [
            b
            for b in window.books.get(token, [])
            if window.end <= b[0] <= window.end + OUTCOME_WITHIN_S
        ]
        if not after:
            continue
        _, bid, ask = after[-1]  # the market's last word (a transient book may come first)
        if bid is not None and bid >= WON_BID and ask is None:
            verdicts.add(UP if is_up else DOWN)
        elif ask is not None and ask <= LOST_ASK and bid is None:
            verdicts.add(DOWN if is_up else UP)
    return verdicts.pop() if len(verdicts) == 1 else None


def market_mid(window: MarketWindow, rem: int) -> float | None:
    """The Up token's mid at the checkpoint ``rem`` seconds before the end: its first book at
    or after ``end - rem``, within ``GRACE_S``; None without one, or with an empty side."""
    at = window.end - rem
    for t, bid, ask in window.books.get(window.up_token, []):
        if t >= at + GRACE_S:
            return None
        if t >= at:
            return (bid + ask) / 2 if bid is not None and ask is not None else None
    return None


def per_window(tape: Iterable[dict[str, Any]], rems: Iterable[int]) -> list[dict[str, Any]]:
    """Per window, as ``app.calibration.summary`` takes them: ``outcome`` (from the books) and
    ``checkpoints`` with the market's mid (``pUp`` is None: the data has no price)."""
    found = []
    rems = list(rems)
    for window in sorted(windows_of(tape).values(), key=lambda w: w.window_start):
        checkpoints = [
            {"remS": rem, "pUp": None, "marketMid": market_mid(window, rem)} for rem in rems
        ]
        found.append(
            {
                "slug": window.slug,
                "windowStart": window.window_start,
                "outcome": outcome_of(window),
                "outcomeSource": "books after the end",
                "checkpoints": [c for c in checkpoints if c["marketMid"] is not None],
            }
        )
    return found
