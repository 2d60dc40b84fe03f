"""``python -m harness.real_data SRC... --out DIR``: public real data -> a tape in DIR.

SRC are files or folders (searched recursively) holding Binance 1-second klines
(``BTCUSDT-1s-YYYY-MM-DD.zip|csv``; a plain clone of IGOLz/polyedge-v2 will do) or the
Cronos books (``market_data/*.parquet``). One kind per run, since the two are weeks apart
and a replay of both at once would walk the weeks between them: the klines when SRC has
them, the books with ``--books`` (or when there are no klines).

    python -m harness.real_data DATA --out tapes/ [--rule spot|twap] [--lookback 60]
        [--official polymarket_btc_5m_enriched.csv] [--start 2026-03-15 --days 2]
    python -m harness.real_data DATA --books --out books/

A klines tape runs from an hour before the first day (when the data has it) to a few
minutes after the last; ``python -m app.backtest DIR`` replays it.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date, timedelta
from pathlib import Path

from app.config import DEFAULT_SYMBOL
from app.markets import MARKETS
from harness.fake_polymarket import SPOT, TWAP
from harness.real_data import binance, cronos, files, klines


def main(argv: list[str] | None = None) -> int:
    """Convert, write, say what was written; 2 for unusable arguments or data."""
    parser = argparse.ArgumentParser(
        prog="python -m harness.real_data", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("src", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rule", choices=(SPOT, TWAP), default=SPOT)
    parser.add_argument("--lookback", type=int, choices=(60, 30), default=60)
    parser.add_argument(
        "--lag",
        type=float,
        default=binance.ARRIVAL_LAG_S,
        help="seconds from a price's stamp to its arrival",
    )
    parser.add_argument(
        "--symbol", choices=list(MARKETS), default=DEFAULT_SYMBOL,
        help="the market: reads SYMBOLUSDT-1s-* klines, writes that market's frames",
    )  # fmt: skip
    parser.add_argument("--official", type=Path, help="a CSV of official outcomes (BTC's)")
    parser.add_argument("--start", type=date.fromisoformat, help="first day (YYYY-MM-DD)")
    parser.add_argument("--days", type=int, default=None)
    parser.add_argument("--books", action="store_true", help="convert the parquet books")
    args = parser.parse_args(argv)
    missing = [str(p) for p in args.src if not p.exists()]
    if missing:
        parser.error(f"no such file or folder: {', '.join(missing)}")
    found = files.discover(args.src, symbol=f"{args.symbol}USDT")
    try:
        if args.books or (found.parquet and not found.klines):
            if not found.parquet:
                parser.error("--books: no market_data/*.parquet found")
            count = files.write_hourly(cronos.lines(cronos.read_rows(found.parquet)), args.out)
            print(f"{count} lines from {len(found.parquet)} parquet files -> {args.out}")
            return 0
        if not found.klines:
            parser.error(f"no {args.symbol}USDT-1s-*.zip|csv and no market_data/*.parquet found")
        return _klines(args, found)
    except (cronos.CronosError, klines.KlineError, ValueError, OSError) as exc:
        print(f"real_data: {exc}", file=sys.stderr)
        return 2


def _klines(args: argparse.Namespace, found: files.Inputs) -> int:
    days = sorted(found.klines)
    first = args.start or days[0]
    count = args.days or (days[-1] - first).days + 1
    if count < 1:
        raise ValueError(f"--start {first} is after the data's last day {days[-1]}")
    wanted = [first + timedelta(d) for d in range(-1, count + 1)]  # the day before: history
    ticks = klines.Ticks.load(found.klines[d].path for d in wanted if d in found.klines)
    if ticks.first is None:
        raise ValueError(f"no klines from {first} for {count} days")
    options = binance.TapeOptions(
        rule=args.rule, lookback=args.lookback, lag_s=args.lag, symbol=args.symbol
    )
    official_path = args.official or (found.official if args.rule == SPOT else None)
    official = binance.read_official(official_path) if official_path else None
    span = binance.span(ticks.first, first, count)
    written = files.write_hourly(
        binance.lines(ticks, span.start, span.end, options, official), args.out
    )
    with_outcome = sum(1 for t0 in official or {} if span.start <= t0 < span.end)
    print(
        f"{written} lines, {first} for {count} days ({args.rule}"
        f"{f' {args.lookback} s' if args.rule == TWAP else ''}), "
        f"{with_outcome} official outcomes -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
