"""The backtest's report: checkpoints per window, outcomes, scores per time left, reliability.

A window's checkpoint at ``rem`` seconds left is the first board with ``rem - GRACE_S <
rem_secs ≤ rem`` (a window the tape joined late has no earlier checkpoints: missing, never
filled in). ``pUp`` is the model's own fraction, ``marketMid`` the mid of UP's best bid and
ask (None when a side is empty); both None when the row was stale at that board.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from app.backtest import outcomes, scores
from app.backtest.replay import Board, Replay, new_replay, run

REMS = (290, 240, 180, 120, 90, 60, 30, 15, 5)
GRACE_S = 2.0


@dataclass
class Window:
    """What the boards said about one window."""

    slug: str
    window_start: int
    rule: str | None = None
    price_to_beat: float | None = None
    up_token: str | None = None
    down_token: str | None = None
    checkpoints: dict[int, dict[str, Any]] = field(default_factory=dict)


def _mid(bid: Any, ask: Any) -> float | None:
    if bid is None or ask is None:
        return None
    return (float(bid) + float(ask)) / 2


def track(windows: dict[str, Window], board: Board, stale_after_ms: int) -> None:
    """Take one board into the windows it speaks of."""
    row = board.row
    slug = row.get("slug")
    if not isinstance(slug, str):
        return
    window = windows.get(slug)
    if window is None:
        window = windows[slug] = Window(slug, int(row["windowStart"]))
    window.rule = row.get("settlement") or window.rule
    if row.get("priceToBeat") is not None:
        window.price_to_beat = float(row["priceToBeat"])
    window.up_token = row.get("up_token_id") or window.up_token
    window.down_token = row.get("down_token_id") or window.down_token
    rem = float(row["rem_secs"])
    stale = board.t * 1000 - float(row["ts"]) > stale_after_ms
    for checkpoint in REMS:
        if checkpoint not in window.checkpoints and checkpoint - GRACE_S < rem <= checkpoint:
            window.checkpoints[checkpoint] = {
                "remS": checkpoint,
                "pUp": None if stale else board.p_up,
                "marketMid": None if stale else _mid(row.get("up_bid"), row.get("up_ask")),
            }


def backtest(
    lines: Iterable[dict[str, Any]], tick_ms: int = 500, stale_after_ms: int = 3000
) -> dict[str, Any]:
    """Replay ``lines`` and return the report document (``docs/backtest.md``)."""
    started = time.perf_counter()
    remaining = iter(lines)
    first = next(remaining, None)
    replay = new_replay(stale_after_ms, float(first["t"]) if first is not None else 0.0)
    lines = itertools.chain([first], remaining) if first is not None else []
    windows: dict[str, Window] = {}
    boards = 0
    live_log = logging.getLogger("app.refresher")
    level = live_log.level
    # The live code's warnings (an upstream that did not answer...) describe the recording,
    # once per retry: a day of tape would print thousands. Errors still show.
    live_log.setLevel(logging.ERROR)
    try:
        for board in run(replay, lines, tick_ms):
            boards += 1
            track(windows, board, stale_after_ms)
    finally:
        live_log.setLevel(level)
        replay.source.close()
    elapsed = time.perf_counter() - started
    return document(replay, windows, boards, elapsed)


def document(
    replay: Replay, windows: dict[str, Window], boards: int, elapsed_s: float
) -> dict[str, Any]:
    """The report: per window, per rem bucket, reliability, and the replay's own figures."""
    winners = {**outcomes.gamma_winners(replay.gamma_frames), **replay.winners}
    by_start = {w.window_start: w for w in windows.values()}
    per_window = []
    for window in sorted(windows.values(), key=lambda w: w.window_start):
        following = by_start.get(window.window_start + 300)
        final = following.price_to_beat if following is not None else None
        result, source = outcomes.outcome(
            window.up_token, window.down_token, winners, window.price_to_beat, final
        )
        per_window.append(
            {
                "slug": window.slug,
                "windowStart": window.window_start,
                "rule": window.rule,
                "priceToBeat": window.price_to_beat,
                "outcome": result,
                "outcomeSource": source,
                "checkpoints": [window.checkpoints[r] for r in REMS if r in window.checkpoints],
            }
        )
    tape_s = (replay.last_t or 0.0) - (replay.first_t or 0.0)
    return {
        "windows": len(per_window),
        "windowsWithOutcome": sum(1 for w in per_window if w["outcome"] is not None),
        "buckets": buckets(per_window),
        "reliability": scores.reliability(model_pairs(per_window)),
        "perWindow": per_window,
        "replay": {
            "lines": replay.lines,
            "boards": boards,
            "tapeSeconds": round(tape_s, 3),
            "seconds": round(elapsed_s, 3),
            "speed": round(tape_s / elapsed_s, 1) if elapsed_s > 0 else None,
        },
    }


def _points(per_window: list[dict[str, Any]], rem: int) -> list[tuple[dict[str, Any], int]]:
    found: list[tuple[dict[str, Any], int]] = []
    for window in per_window:
        if window["outcome"] is None:
            continue
        o = 1 if window["outcome"] == outcomes.UP else 0
        found.extend((c, o) for c in window["checkpoints"] if c["remS"] == rem)
    return found


def buckets(per_window: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per rem: the model's and the market's scores, and the model's minus the market's over
    the windows that have both."""
    table = []
    for rem in REMS:
        points = _points(per_window, rem)
        model = [(c["pUp"], o) for c, o in points if c["pUp"] is not None]
        market = [(c["marketMid"], o) for c, o in points if c["marketMid"] is not None]
        both = [(c, o) for c, o in points if c["pUp"] is not None and c["marketMid"] is not None]
        m = scores.mean_scores([(c["pUp"], o) for c, o in both])
        k = scores.mean_scores([(c["marketMid"], o) for c, o in both])
        difference: dict[str, float | None] = {}
        for name in ("brier", "logLoss"):
            mine, theirs = m[name], k[name]
            difference[name] = mine - theirs if mine is not None and theirs is not None else None
        table.append(
            {
                "remS": rem,
                "n": len(model),
                "model": scores.mean_scores(model),
                "nMarket": len(market),
                "market": scores.mean_scores(market),
                "difference": {**difference, "n": len(both)},
            }
        )
    return table


def model_pairs(per_window: list[dict[str, Any]]) -> list[tuple[float, int]]:
    """(P(up), outcome) at every checkpoint of every window with an outcome."""
    return [
        (c["pUp"], o) for rem in REMS for c, o in _points(per_window, rem) if c["pUp"] is not None
    ]


def _f(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def text(doc: dict[str, Any]) -> str:
    """The report as a terminal reads it."""
    replay = doc["replay"]
    out = [
        f"{doc['windows']} windows ({doc['windowsWithOutcome']} with an outcome); "
        f"{replay['lines']} tape lines, {replay['tapeSeconds']:.0f} s of tape replayed in "
        f"{replay['seconds']:.1f} s ({replay['speed']}x), {replay['boards']} boards",
        "",
        "rem s      n  model brier  model logloss   n mkt  market brier  market logloss"
        "  diff brier  diff logloss",
    ]
    for b in doc["buckets"]:
        d = b["difference"]
        out.append(
            f"{b['remS']:>5} {b['n']:>6} {_f(b['model']['brier']):>12} "
            f"{_f(b['model']['logLoss']):>14} {b['nMarket']:>7} {_f(b['market']['brier']):>13} "
            f"{_f(b['market']['logLoss']):>15} {_f(d['brier']):>11} {_f(d['logLoss']):>13}"
        )
    out += ["", "reliability (model)   n   mean p  observed"]
    for r in doc["reliability"]:
        out.append(
            f"  [{r['lo']:.1f}, {r['hi']:.1f}{']' if r['hi'] == 1 else ')'} {r['n']:>8} "
            f"{_f(r['meanP'], 3):>8} {_f(r['observed'], 3):>9}"
        )
    out += ["", "window                         rule  price to beat  outcome (source)"]
    for w in doc["perWindow"]:
        outcome = f"{w['outcome']} ({w['outcomeSource']})" if w["outcome"] else "—"
        ptb = _f(w["priceToBeat"], 2)
        out.append(f"{w['slug']:<30} {w['rule'] or '—':<5} {ptb:>14}  {outcome}")
    return "\n".join(out)
