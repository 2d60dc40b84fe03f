"""The model on real data: public real prices and markets replayed through the live source.

    make bench-real DATA=folder        # or: python -m bench.real FOLDER [options]
    python -m bench.real FOLDER [--rule spot|twap] [--lookback 60] [--json OUT]
        [--chart docs/real-reliability.svg] [--jobs 2] [--cache DIR]

FOLDER is searched recursively for (a missing part is skipped, and the run says so):

- ``BTCUSDT-1s-YYYY-MM-DD.zip|csv``: Binance 1-second klines (IGOLz/polyedge-v2, a plain
  clone will do). Each day becomes a tape (``harness.real_data.binance``): the kline closes
  as the Chainlink spot on RTDS, arriving 1.4 s after their stamp, each window's Gamma
  answer, placeholder books. A day's tape starts an hour before its midnight (the model's
  volatility and scale warm up on that hour and on the 3 h history snapshot before it) and
  only windows starting inside the day are scored (on the data's first day, only those with
  an hour of feed before them).
- ``polymarket_btc_5m_enriched.csv`` (felixdoteth/polymarket-btc-5m-dataset-): the official
  outcomes, written on the spot tapes as ``market_resolved`` for the windows it covers.
- ``market_data/*.parquet`` (CronosVirus00/polymarket-BTC5min-database): real CLOB books of
  50 windows, no price (``harness.real_data.cronos``).

How the figures are taken:

- Each day's tape is replayed by ``app.backtest.report.backtest`` (the live source's own
  code, the model as it is in the working tree), one process per day on all cores; tapes are
  cached (``--cache``, default ``$TMPDIR/probboard-real-tapes``) and rebuilt when the data,
  the options or the converter change.
- A checkpoint is the backtest's (the first board with rem - 2 s < rem_secs <= rem; pUp null
  when the row was stale). Scores are ``app.calibration.scores``: log loss (natural log, p
  clipped to [1e-4, 1 - 1e-4]) and Brier, against two outcomes:

  - ``computed``: from the replayed feed itself (the next window's latched price to beat
    against this one's, ties UP): the outcome of the prices the model saw. Every day.
  - ``official``: Polymarket's resolution (on Chainlink, not Binance: a basis of tens of
    dollars), on the days the CSV covers. Spot tapes only: TWAP markets did not exist then.

  A coin flip (0.5) is scored on the same checkpoints. The books are placeholders, so no
  market score is ever given for these tapes.
- Tails: over the checkpoints where the model said < 10 % (> 90 %), the mean said and how
  often UP came. "With p": the share of the nine checkpoints of every scored window that
  have a probability (a missing or null one counts against it).
- Days 2026-03-12, -13 and -14 (``FIT_DAYS``) are those the model's constants are fitted on
  ("fit"); the others are "held out", and summed up together.
- The market (Cronos): its Up token's mid at each checkpoint (the first book at or after
  T - rem, within 2 s; none with an empty side) against the outcome read from the books
  after the end; scores do not depend on which token is Up (see harness/real_data/cronos.py).
  These are other windows (2026-04-16) than the model's: no side-by-side comparison.

Nothing is pinned: the replays share the machine's cores, and their speed is printed only
as information (x real time per process).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import shutil
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from app.backtest.replay import UNNAMED_TAPE_MARKET
from app.calibration import outcomes, scores
from app.calibration.checkpoints import REMS
from app.config import DEFAULT_SYMBOL
from app.markets import MARKETS
from harness.fake_polymarket import SPOT, TWAP
from harness.real_data import binance, cronos, files, klines
from harness.spans import WINDOW_S

FIT_DAYS = (date(2026, 3, 12), date(2026, 3, 13), date(2026, 3, 14))
COIN = 0.5
LOW, HIGH = 0.1, 0.9
COMPUTED, OFFICIAL = "computed", "official"
HERE = Path(__file__).resolve()
CONVERTER = [
    *sorted((HERE.parents[1] / "harness" / "fake_polymarket").glob("*.py")),
    *sorted((HERE.parents[1] / "harness" / "real_data").glob("*.py")),
]


@dataclass(frozen=True)
class DayJob:
    """One day to convert (or take from the cache) and replay."""

    day: date
    kline_files: tuple[str, ...]  # the day before (history), the day, the day after (tail)
    official: str | None
    rule: str
    lookback: int
    cache: str
    symbol: str


def _stat(path: str) -> list[Any]:
    info = os.stat(path)
    return [Path(path).name, info.st_size, info.st_mtime_ns]


def _key(job: DayJob) -> str:
    """What the tape depends on: the data files, the options, the converter's code."""
    digest = hashlib.sha256()
    for source in CONVERTER:
        digest.update(source.read_bytes())
    inputs = [
        str(job.day),
        job.symbol,
        job.rule,
        job.lookback,
        binance.ARRIVAL_LAG_S,
        binance.HISTORY_S,
        [_stat(p) for p in job.kline_files],
        _stat(job.official) if job.official else None,
    ]
    digest.update(json.dumps(inputs).encode())
    return digest.hexdigest()[:16]


def _tape(job: DayJob) -> tuple[Path, binance.Span]:
    """The day's tape folder (written unless the cache has it) and its span."""
    market = "" if job.symbol == UNNAMED_TAPE_MARKET else f"{job.symbol.lower()}-"
    name = f"{market}{job.day}-{job.rule}{job.lookback if job.rule == TWAP else ''}"
    folder = Path(job.cache) / f"{name}-{_key(job)}"
    marker = folder / "span.json"
    if marker.exists():
        return folder, binance.Span(**json.loads(marker.read_text()))
    for old in Path(job.cache).glob(f"{name}-*"):
        shutil.rmtree(old, ignore_errors=True)  # an older conversion of the same day
    ticks = klines.Ticks.load(Path(p) for p in job.kline_files)
    if ticks.first is None:
        raise ValueError(f"{job.day}: the kline files are empty")
    span = binance.span(ticks.first, job.day)
    official = binance.read_official(Path(job.official)) if job.official else None
    options = binance.TapeOptions(rule=job.rule, lookback=job.lookback, symbol=job.symbol)
    work = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(work, ignore_errors=True)
    files.write_hourly(binance.lines(ticks, span.start, span.end, options, official), work)
    (work / "span.json").write_text(json.dumps(asdict(span)))
    work.rename(folder)  # whole or not at all: a run stopped halfway leaves only a .tmp
    return folder, span


def replay_day(job: DayJob) -> dict[str, Any]:
    """Convert (or reuse) and replay one day: its scored windows, as the backtest saw them."""
    from app.backtest.report import backtest
    from app.backtest.tapes import read_tapes

    started = time.perf_counter()
    folder, span = _tape(job)
    converted = time.perf_counter() - started
    doc = backtest(read_tapes([folder]))
    by_start = {w["windowStart"]: w for w in doc["perWindow"]}
    windows = []
    for window in doc["perWindow"]:
        if not span.scored_from <= window["windowStart"] < span.scored_to:
            continue
        following = by_start.get(window["windowStart"] + WINDOW_S)
        final = following["priceToBeat"] if following else None
        computed, _ = outcomes.outcome(None, None, {}, window["priceToBeat"], final)
        official = window["outcome"] if window["outcomeSource"] == "market" else None
        checkpoints = [{"remS": c["remS"], "pUp": c["pUp"]} for c in window["checkpoints"]]
        windows.append(
            {
                "slug": window["slug"],
                "windowStart": window["windowStart"],
                "priceToBeat": window["priceToBeat"],
                COMPUTED: computed,
                OFFICIAL: official,
                "checkpoints": checkpoints,
            }
        )
    return {
        "day": str(job.day),
        "span": asdict(span),
        "windows": windows,
        "replay": doc["replay"],
        "convertS": round(converted, 1),
    }


# -- figures -----------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _tail(pairs: list[tuple[float, int]], inside: Any) -> dict[str, Any]:
    chosen = [(p, o) for p, o in pairs if inside(p)]
    return {
        "n": len(chosen),
        "said": _mean([p for p, _ in chosen]),
        "observedUp": _mean([float(o) for _, o in chosen]),
    }


def figures(
    windows: list[dict[str, Any]], which: str, rems: tuple[int, ...] = REMS
) -> dict[str, Any]:
    """Scores of the model (and of a coin flip) against the ``which`` outcome, at the
    checkpoints ``rems`` (the window length's: the 5-minute ones unless told)."""
    settled = [w for w in windows if w[which] is not None]
    by_rem: dict[int, list[tuple[float, int]]] = {rem: [] for rem in rems}
    for window in settled:
        o = 1 if window[which] == outcomes.UP else 0
        for c in window["checkpoints"]:
            if c["pUp"] is not None and c["remS"] in by_rem:
                by_rem[c["remS"]].append((c["pUp"], o))
    pooled = [pair for rem in rems for pair in by_rem[rem]]
    rows = []
    for rem, pairs in [*by_rem.items(), ("all", pooled)]:
        rows.append(
            {
                "remS": rem,
                "n": len(pairs),
                "model": scores.mean_scores(pairs),
                "coin": scores.mean_scores([(COIN, o) for _, o in pairs]),
            }
        )
    return {
        "windows": len(settled),
        "buckets": rows,
        "reliability": scores.reliability(pooled),
        "tails": {
            "below10": _tail(pooled, lambda p: p < LOW),
            "above90": _tail(pooled, lambda p: p > HIGH),
        },
        "withP": len(pooled) / (len(rems) * len(settled)) if settled else None,
    }


def agreement(windows: list[dict[str, Any]]) -> dict[str, int]:
    """How often the official outcome is the one computed from the replayed ticks."""
    both = [w for w in windows if w[OFFICIAL] is not None and w[COMPUTED] is not None]
    return {"n": len(both), "agree": sum(1 for w in both if w[OFFICIAL] == w[COMPUTED])}


def summary(windows: list[dict[str, Any]], official: bool) -> dict[str, Any]:
    """Figures against the computed outcome and, where there are any, the official one."""
    found = {COMPUTED: figures(windows, COMPUTED)}
    if official:
        found[OFFICIAL] = figures(windows, OFFICIAL)
        found["agreement"] = agreement(windows)
    return found


def market_figures(per_window: list[dict[str, Any]]) -> dict[str, Any]:
    """The market mid's scores per checkpoint (and of a coin flip), and its reliability."""
    settled = [w for w in per_window if w["outcome"] is not None]
    by_rem: dict[int, list[tuple[float, int]]] = {rem: [] for rem in REMS}
    for window in settled:
        o = 1 if window["outcome"] == outcomes.UP else 0
        for c in window["checkpoints"]:
            by_rem[c["remS"]].append((c["marketMid"], o))
    pooled = [pair for rem in REMS for pair in by_rem[rem]]
    rows = [
        {
            "remS": rem,
            "n": len(pairs),
            "market": scores.mean_scores(pairs),
            "coin": scores.mean_scores([(COIN, o) for _, o in pairs]),
        }
        for rem, pairs in [*by_rem.items(), ("all", pooled)]
    ]
    return {
        "windows": len(per_window),
        "windowsWithOutcome": len(settled),
        "buckets": rows,
        "reliability": scores.reliability(pooled),
        "tails": {
            "below10": _tail(pooled, lambda p: p < LOW),
            "above90": _tail(pooled, lambda p: p > HIGH),
        },
    }


# -- printing ----------------------------------------------------------------------------


def _f(value: float | None, digits: int = 4) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f} %"


def tails_lines(tails: dict[str, Any], indent: str = "  ") -> list[str]:
    """The two tail honesty lines: what was said there, how often UP came, and the gap in
    points in the direction of overconfidence (positive: the tail is too sure)."""
    out = []
    for key, name, sign in (("below10", "< 10 %", 1), ("above90", "> 90 %", -1)):
        tail = tails[key]
        gap = None if tail["n"] == 0 else sign * 100 * (tail["observedUp"] - tail["said"])
        out.append(
            f"{indent}said {name}: n {tail['n']}, mean said {_pct(tail['said'])}, UP came "
            f"{_pct(tail['observedUp'])}: {_f(gap, 1)} points too sure"
        )
    return out


def block(title: str, found: dict[str, Any], with_coin: str = "model") -> list[str]:
    """The per-checkpoint table, reliability and tails of one set of figures."""
    out = [
        title,
        f"  rem s      n  {with_coin} logloss  {with_coin} brier  coin logloss  coin brier",
    ]
    for b in found["buckets"]:
        m = b[with_coin]
        out.append(
            f"  {b['remS']:>5} {b['n']:>6} {_f(m['logLoss']):>13} {_f(m['brier']):>11} "
            f"{_f(b['coin']['logLoss']):>13} {_f(b['coin']['brier']):>11}"
        )
    out.append(f"  reliability ({with_coin})       n   mean p  observed UP")
    for r in found["reliability"]:
        out.append(
            f"    [{r['lo']:.1f}, {r['hi']:.1f}{']' if r['hi'] == 1 else ')'} {r['n']:>9} "
            f"{_f(r['meanP'], 3):>8} {_f(r['observed'], 3):>12}"
        )
    out += tails_lines(found["tails"])
    if found.get("withP") is not None:
        out.append(
            f"  with a probability: {_pct(found['withP'])} of the checkpoints "
            f"of {found['windows']} windows"
        )
    return out


def day_line(result: dict[str, Any], which: str, label: str) -> str:
    """One day's log loss per checkpoint and in all, against ``which`` outcome."""
    found = result["summary"].get(which)
    if found is None or found["windows"] == 0:
        return f"{result['day']}  {label:<8} {which:<8}  (no {which} outcomes)"
    ll = [b["model"]["logLoss"] for b in found["buckets"]]
    cells = " ".join(f"{_f(v, 3):>5}" for v in ll)
    low, high = found["tails"]["below10"], found["tails"]["above90"]
    return (
        f"{result['day']}  {label:<8} {which:<8} {found['windows']:>4} {cells}  "
        f"{_pct(found['withP']):>7}  <10%: {_pct(low['said'])}/{_pct(low['observedUp'])}"
        f"  >90%: {_pct(high['said'])}/{_pct(high['observedUp'])}"
    )


# -- the chart ---------------------------------------------------------------------------


def reliability_svg(bins: list[dict[str, Any]], title: str, note: str) -> str:
    """A self-contained SVG of a reliability table: observed UP against the forecast, the
    diagonal for reference, a dot per bin sized by its count (as the page draws it)."""
    heads = [(line, 13, "bold") for line in textwrap.wrap(title, 48)]
    heads += [(line, 11, "normal") for line in textwrap.wrap(note, 60)]
    left, plot = 56, 320
    top = 22 + 16 * len(heads)
    width, height = left + plot + 24, top + plot + 48

    def x(p: float) -> float:
        return left + p * plot

    def y(p: float) -> float:
        return top + (1 - p) * plot

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        '<rect width="100%" height="100%" fill="#fff"/>',
    ]
    for i, (text, size, weight) in enumerate(heads):
        colour = "#000" if weight == "bold" else "#555"
        parts.append(
            f'<text x="12" y="{20 + 16 * i}" font-size="{size}" font-weight="{weight}" '
            f'fill="{colour}">{_xml(text)}</text>'
        )
    for tick in (0, 0.25, 0.5, 0.75, 1):
        parts += [
            f'<line x1="{x(tick):.1f}" y1="{y(0):.1f}" x2="{x(tick):.1f}" y2="{y(1):.1f}" '
            'stroke="#eee"/>',
            f'<line x1="{x(0):.1f}" y1="{y(tick):.1f}" x2="{x(1):.1f}" y2="{y(tick):.1f}" '
            'stroke="#eee"/>',
            f'<text x="{x(tick):.1f}" y="{y(0) + 16:.1f}" text-anchor="middle">'
            f"{round(tick * 100)}%</text>",
            f'<text x="{x(0) - 6:.1f}" y="{y(tick) + 4:.1f}" text-anchor="end">'
            f"{round(tick * 100)}%</text>",
        ]
    parts += [
        f'<rect x="{x(0)}" y="{y(1)}" width="{plot}" height="{plot}" fill="none" stroke="#999"/>',
        f'<line x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}" stroke="#999" '
        'stroke-dasharray="4 3"/>',
        f'<text x="{x(0.5)}" y="{y(0) + 34}" text-anchor="middle">forecast P(up)</text>',
        f'<text transform="translate(14 {y(0.5)}) rotate(-90)" text-anchor="middle">'
        "observed frequency of UP</text>",
    ]
    shown = [b for b in bins if b["n"] and b["meanP"] is not None and b["observed"] is not None]
    path = " ".join(f"{x(b['meanP']):.1f},{y(b['observed']):.1f}" for b in shown)
    if path:
        parts.append(f'<polyline points="{path}" fill="none" stroke="#1f6feb" stroke-width="1.5"/>')
    for b in shown:
        radius = min(9.0, 2.5 + math.sqrt(b["n"]) / 8)
        label = (
            f"{b['n']} forecasts near {round(100 * b['meanP'])}%, UP {round(100 * b['observed'])}%"
        )
        parts.append(
            f'<circle cx="{x(b["meanP"]):.1f}" cy="{y(b["observed"]):.1f}" r="{radius:.1f}" '
            f'fill="#1f6feb" fill-opacity="0.8"><title>{_xml(label)}</title></circle>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _xml(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


# -- the run -----------------------------------------------------------------------------


def _jobs(found: files.Inputs, args: argparse.Namespace, cache: Path) -> list[DayJob]:
    official = str(found.official) if found.official and args.rule == SPOT else None
    jobs = []
    for day in found.klines:
        near = [day + timedelta(d) for d in (-1, 0, 1)]
        paths = tuple(str(found.klines[d].path) for d in near if d in found.klines)
        jobs.append(DayJob(day, paths, official, args.rule, args.lookback, str(cache), args.symbol))
    return jobs


def _replays(jobs: list[DayJob], processes: int) -> list[dict[str, Any]]:
    results = []
    # spawn: each replay starts from a clean interpreter (no state shared with this one)
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        for result in pool.imap_unordered(replay_day, jobs):
            replay = result["replay"]
            print(
                f"  {result['day']}: {len(result['windows'])} windows scored, "
                f"{replay['tapeSeconds'] / 3600:.1f} h of tape replayed in "
                f"{replay['seconds']:.0f} s ({replay['speed']:.0f}x; conversion "
                f"{result['convertS']:.0f} s)",
                flush=True,
            )
            results.append(result)
    return sorted(results, key=lambda r: r["day"])


def main(argv: list[str] | None = None) -> int:
    """Find the data, replay it, print the figures (and write the JSON and the chart)."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.real", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("data", nargs="?", type=Path)
    parser.add_argument("--rule", choices=(SPOT, TWAP), default=SPOT)
    parser.add_argument("--lookback", type=int, choices=(60, 30), default=60)
    parser.add_argument(
        "--symbol", choices=list(MARKETS), default=DEFAULT_SYMBOL,
        help="the market: its klines are SYMBOLUSDT-1s-*; official outcomes and books are BTC's",
    )  # fmt: skip
    parser.add_argument("--json", dest="json_out", type=Path, help="write every figure here")
    parser.add_argument("--chart", type=Path, help="write the held-out reliability SVG here")
    parser.add_argument("--label", default="", help="which model, for the chart's title")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--cache", type=Path, default=Path(tempfile.gettempdir()) / "probboard-real-tapes"
    )
    args = parser.parse_args(argv)
    if args.data is None or not str(args.data).strip():
        parser.error("DATA is required: make bench-real DATA=folder-of-public-data")
    if not args.data.is_dir() or not any(args.data.iterdir()):
        parser.error(f"DATA={args.data}: not a folder, or an empty one")
    pair = f"{args.symbol}USDT"
    found = files.discover([args.data], symbol=pair)  # another market's: klines only
    if not found.klines and not found.parquet:
        parser.error(f"DATA={args.data}: no {pair}-1s-*.zip|csv and no market_data/*.parquet")
    print(
        f"real data from {args.data} ({args.symbol}, rule {args.rule}"
        f"{f', {args.lookback} s TWAP' if args.rule == TWAP else ''}):"
    )
    if found.klines:
        days = list(found.klines)
        print(f"  klines: {len(days)} days of {pair}, {days[0]} to {days[-1]}")
    else:
        print(f"  klines: none found ({pair}-1s-*.zip|csv): no model replay")
    if args.rule == TWAP:
        print(
            "  official outcomes: not used (they are of spot markets; the outcome of a TWAP "
            "window is computed from the ticks)"
        )
    elif args.symbol != files.PUBLISHED_MARKET:
        print("  official outcomes: none for this market (the CSV's are BTC's): computed only")
    elif found.official:
        print(f"  official outcomes: {found.official}")
    else:
        print("  official outcomes: none found (polymarket_btc_5m_enriched.csv): computed only")
    if found.parquet:
        print(f"  market books: {len(found.parquet)} parquet files")
    elif args.symbol != files.PUBLISHED_MARKET:
        print("  market books: none for this market (the Cronos books are BTC's)")
    else:
        print("  market books: none found (market_data/*.parquet): no market figures")
    report: dict[str, Any] = {
        "settings": {
            "symbol": args.symbol,
            "rule": args.rule,
            "lookback": args.lookback,
            "arrivalLagS": binance.ARRIVAL_LAG_S,
            "fitDays": [str(d) for d in FIT_DAYS],
        }
    }
    out: list[str] = []
    if found.klines:
        args.cache.mkdir(parents=True, exist_ok=True)
        jobs = _jobs(found, args, args.cache)
        print(
            f"replaying {len(jobs)} days, {min(args.jobs, len(jobs))} at a time "
            f"(tapes cached in {args.cache}):",
            flush=True,
        )
        results = _replays(jobs, max(1, min(args.jobs, len(jobs))))
        out += _model_report(
            results, args, found.official is not None and args.rule == SPOT, report
        )
    if found.parquet:
        try:
            per_window = cronos.per_window(cronos.lines(cronos.read_rows(found.parquet)), REMS)
        except cronos.CronosError as exc:
            out += ["", f"market books skipped: {exc}"]
        else:
            market = market_figures(per_window)
            report["market"] = market
            out += [
                "",
                *block(
                    f"THE MARKET'S OWN MID (Cronos books, 2026-04-16: {market['windows']} windows, "
                    f"{market['windowsWithOutcome']} with an outcome read from the books after "
                    "the end)",
                    market,
                    "market",
                ),
            ]
    print("\n".join(out))
    if args.json_out:
        args.json_out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"\nfigures written to {args.json_out}")
    return 0


def _model_report(
    results: list[dict[str, Any]],
    args: argparse.Namespace,
    official: bool,
    report: dict[str, Any],
) -> list[str]:
    for result in results:
        result["summary"] = summary(result["windows"], official)
    label = {str(d): "fit" for d in FIT_DAYS}
    held = [w for r in results if r["day"] not in label for w in r["windows"]]
    every = [w for r in results for w in r["windows"]]
    out = [
        "",
        "PER DAY: model log loss per checkpoint (s left), with p, tails (said/UP came)",
        f"day         set      outcome  win. {' '.join(f'{r:>5}' for r in REMS)}   all   with p",
    ]
    for result in results:
        for which in (COMPUTED, OFFICIAL) if official else (COMPUTED,):
            out.append(day_line(result, which, label.get(result["day"], "held out")))
    for result in results:
        agree = result["summary"].get("agreement")
        if agree and agree["n"]:
            out.append(
                f"{result['day']}: official = computed in {agree['agree']} of "
                f"{agree['n']} windows ({_pct(agree['agree'] / agree['n'])})"
            )
    held_summary = summary(held, official)
    every_summary = summary(every, official)
    held_days = ", ".join(r["day"] for r in results if r["day"] not in label)
    for name, found in (
        ("HELD-OUT DAYS (" + held_days + ")", held_summary),
        ("ALL DAYS (fit and held out)", every_summary),
    ):
        for which in (COMPUTED, OFFICIAL):
            if which in found and found[which]["windows"]:
                out += ["", *block(f"{name}, against the {which} outcome:", found[which])]
        agree = found.get("agreement")
        if agree and agree["n"]:
            out.append(
                f"  official = computed in {agree['agree']} of {agree['n']} windows "
                f"({_pct(agree['agree'] / agree['n'])})"
            )
    report["days"] = [
        {
            "day": r["day"],
            "set": label.get(r["day"], "held out"),
            "span": r["span"],
            "replay": r["replay"],
            **r["summary"],
        }
        for r in results
    ]
    report["heldOut"] = held_summary
    report["allDays"] = every_summary
    if args.chart:
        found = held_summary[COMPUTED]
        n = sum(b["n"] for b in found["reliability"])
        note = (
            f"{n} checkpoints of {found['windows']} windows, {held_days}; Binance 1 s as the "
            f"settlement feed, {args.rule} rule, outcome computed"
        )
        title = "Model reliability, real held-out days" + (f": {args.label}" if args.label else "")
        args.chart.write_text(reliability_svg(found["reliability"], title, note))
        out.append(f"\nreliability chart written to {args.chart}")
    return out


if __name__ == "__main__":
    sys.exit(main())
