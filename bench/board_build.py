"""What one board costs the refresher, in process: build, validate, serialise (issue 49, point 6).

    python -m bench.board_build [--symbols BTC,ETH,SOL,XRP] [--windows 5m 5m,15m,1h,4h]
                                [--boards 300] [--cpu 1]

For each ``WINDOWS`` value (the first is the baseline), a refresher on the simulated source
(``SYMBOLS`` x ``WINDOWS`` rows) builds ``--boards`` boards after a warm-up; each is validated
by the board's marshmallow schema (as every published board is) and serialised as published.
Printed: CPU time per board (``time.process_time``, medians of 5 runs) in all, the part of it
in the schema's validation, and the ratio to the baseline. The live source's rows cost more
than the simulated ones (their witnesses and model inputs): ``bench.stream --markets``
measures the refresher's CPU there. Pinned to ``--cpu`` so nothing else shares the core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

from app.board.snapshot import dumps
from app.bus.memory import MemoryBoardBus
from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.schemas import check
from app.schemas.board import PublishedBoardSchema

RUNS = 5


def _cpu_ms(job: Callable[[], Any], count: int) -> float:
    """Median CPU milliseconds per call of ``job`` over ``RUNS`` runs of ``count`` calls."""
    found = []
    for _ in range(RUNS):
        start = time.process_time()
        for _ in range(count):
            job()
        found.append((time.process_time() - start) * 1000 / count)
    return statistics.median(found)


def measure(symbols: str, windows: str, boards: int) -> dict[str, float]:
    """CPU ms per board (build + validate + dumps) and per validation alone."""
    source = SimulatedSource(parse_symbols(symbols), seed=1, spans=parse_windows(windows))
    refresher = Refresher(source, MemoryBoardBus(), 500)
    for _ in range(20):
        refresher.build()
    board = refresher.build()
    schema = PublishedBoardSchema()  # what the refresher validates every board with
    return {
        "rows": float(len(board["items"])),
        "board_ms": _cpu_ms(lambda: dumps(refresher.build()), boards),
        "validate_ms": _cpu_ms(lambda: check(schema, board, "board"), boards),
    }


def main() -> int:
    """Measure each ``--windows`` value and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--symbols", default="BTC,ETH,SOL,XRP")
    parser.add_argument("--windows", nargs="+", default=["5m", "5m,15m,1h,4h"])
    parser.add_argument("--boards", type=int, default=300)
    parser.add_argument("--cpu", type=int, default=1)
    args = parser.parse_args()
    if args.cpu in os.sched_getaffinity(0):
        os.sched_setaffinity(0, {args.cpu})
    rows = {windows: measure(args.symbols, windows, args.boards) for windows in args.windows}
    base = next(iter(rows.values()))["board_ms"]
    print(
        f"{'WINDOWS':>16} {'rows':>5} {'board ms':>9} {'validate ms':>12} {'share':>6} {'ratio':>6}"
    )
    for windows, row in rows.items():
        share = row["validate_ms"] / row["board_ms"]
        print(
            f"{windows:>16} {row['rows']:>5.0f} {row['board_ms']:>9.2f} "
            f"{row['validate_ms']:>12.2f} {share:>6.0%} {row['board_ms'] / base:>6.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
