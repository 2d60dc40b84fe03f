"""The backtest's report: checkpoints per window, outcomes, scores per time left, reliability
(``app.calibration``), and the replay's own figures."""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable
from typing import Any

from app.backtest.replay import Replay, markets_of, new_replay, run, spans_of
from app.calibration import outcomes, summary
from app.calibration.checkpoints import REMS, Window, settled, track
from app.markets import DEFAULT_SPAN

# Lines read ahead for the tape's RTDS subscription and first Gamma lookups (they come
# first: the source subscribes and looks its windows up as it starts).
HEAD_LINES = 2000
Part = tuple[str, str]  # (market symbol, window name): one document of the report


def backtest(
    lines: Iterable[dict[str, Any]], tick_ms: int = 500, stale_after_ms: int = 3000
) -> dict[str, Any]:
    """Replay ``lines`` and return the report document (``docs/backtest.md``): one document
    per (market, window length) the tape holds, keyed unless it holds one market's 5-minute
    windows only (``keyed``)."""
    started = time.perf_counter()
    remaining = iter(lines)
    # The first lines tell which markets (its RTDS subscription) and which window lengths
    # (its Gamma lookups) the tape holds.
    head = list(itertools.islice(remaining, HEAD_LINES))
    start_t = float(head[0]["t"]) if head else 0.0
    replay = new_replay(stale_after_ms, start_t, markets_of(head), spans_of(head))
    lines = itertools.chain(head, remaining)
    # By (symbol, window name): each market's windows of each length, by slug.
    windows: dict[Part, dict[str, Window]] = {}
    boards: dict[Part, int] = {}
    live_log = logging.getLogger("app.refresher")
    level = live_log.level
    # The live code's warnings (an upstream that did not answer...) describe the recording,
    # once per retry: a day of tape would print thousands. Errors still show.
    live_log.setLevel(logging.ERROR)
    try:
        for board in run(replay, lines, tick_ms):
            part = (board.row.symbol, board.row.window)
            boards[part] = boards.get(part, 0) + 1
            track(windows.setdefault(part, {}), board.row, board.t, stale_after_ms)
    finally:
        live_log.setLevel(level)
        replay.source.close()
    elapsed = time.perf_counter() - started
    documents = {
        (market.symbol, span.name): document(
            replay,
            windows.get((market.symbol, span.name), {}),
            boards.get((market.symbol, span.name), 0),
            elapsed,
            span.rems,
        )
        for span in replay.source.spans
        for market in replay.source.markets
    }
    return keyed(documents)


def keyed(documents: dict[Part, dict[str, Any]]) -> dict[str, Any]:
    """The report of ``documents`` (by symbol and window name): one market's 5-minute
    windows alone, its document as it is; otherwise the 5-minute documents under
    ``symbols`` and each other length's under ``windows.<name>.symbols``."""
    if len(documents) == 1 and next(iter(documents))[1] == DEFAULT_SPAN.name:
        return next(iter(documents.values()))
    found: dict[str, Any] = {}
    for (symbol, window), doc in documents.items():
        place = found if window == DEFAULT_SPAN.name else (
            found.setdefault("windows", {}).setdefault(window, {})
        )  # fmt: skip
        place.setdefault("symbols", {})[symbol] = doc
    return found


def document_of(
    report: dict[str, Any], window: str = DEFAULT_SPAN.name, symbol: str | None = None
) -> dict[str, Any]:
    """The document of one (market, window) in a report of any shape; ``symbol`` may be
    left out where the report has one market."""
    if "symbols" not in report and not isinstance(report.get("windows"), dict):
        if window != DEFAULT_SPAN.name:
            raise KeyError(window)
        return report  # one market's 5-minute windows
    place = report if window == DEFAULT_SPAN.name else report["windows"][window]
    by_symbol: dict[str, dict[str, Any]] = place["symbols"]
    if symbol is None:
        [only] = by_symbol.values()
        return only
    return by_symbol[symbol]


def document(
    replay: Replay,
    windows: dict[str, Window],
    boards: int,
    elapsed_s: float,
    rems: tuple[int, ...] = REMS,
) -> dict[str, Any]:
    """One (market, window)'s report: per window, per rem bucket (at ``rems``, its window
    length's checkpoints), reliability, and the replay's own figures."""
    winners = {**outcomes.gamma_winners(replay.gamma_frames), **replay.winners}
    per_window = []
    for window in sorted(windows.values(), key=lambda w: w.window_start):
        result, source = settled(window, windows, winners)
        per_window.append(
            {
                "slug": window.slug,
                "windowStart": window.window_start,
                "rule": window.rule,
                "priceToBeat": window.price_to_beat,
                "outcome": result,
                "outcomeSource": source,
                "checkpoints": [
                    window.checkpoints[r] for r in window.rems if r in window.checkpoints
                ],
            }
        )
    tape_s = (replay.last_t or 0.0) - (replay.first_t or 0.0)
    return {
        "windows": len(per_window),
        "windowsWithOutcome": sum(1 for w in per_window if w["outcome"] is not None),
        **summary.summarize(per_window, rems),
        "perWindow": per_window,
        "replay": {
            "lines": replay.lines,
            "boards": boards,
            "tapeSeconds": round(tape_s, 3),
            "seconds": round(elapsed_s, 3),
            "speed": round(tape_s / elapsed_s, 1) if elapsed_s > 0 and tape_s > 0 else None,
        },
    }


def _f(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def text(doc: dict[str, Any]) -> str:
    """The report as a terminal reads it (a section per market and window when there are
    several: ``== BTC 15m``)."""
    sections = [
        (symbol, DEFAULT_SPAN.name, part) for symbol, part in doc.get("symbols", {}).items()
    ]
    if isinstance(doc.get("windows"), dict):
        for window, place in doc["windows"].items():
            sections += [(symbol, window, part) for symbol, part in place["symbols"].items()]
    if sections:
        return "\n\n".join(
            f"== {symbol} {window}\n{text(part)}" for symbol, window, part in sections
        )
    replay = doc["replay"]
    out = [
        f"{doc['windows']} windows ({doc['windowsWithOutcome']} with an outcome); "
        f"{replay['lines']} tape lines, {replay['tapeSeconds']:.0f} s of tape replayed in "
        f"{replay['seconds']:.1f} s ({_f(replay['speed'], 0)}x), {replay['boards']} boards",
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
