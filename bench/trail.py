"""What the page's window charts cost a web worker, in process (issue 50, point 4).

    python -m bench.trail [--symbols BTC,ETH,SOL,XRP] [--windows 5m 5m,15m,1h,4h]
                          [--boards 2400] [--cpu 1]

Every board a worker receives goes through ``WindowTrail.add`` (a bus listener), which parses
a row only when its kind's next point is due. For each ``WINDOWS`` value (the first is the
baseline), boards of the simulated source every 500 ms of a driven clock (``--boards`` of
them: 20 minutes by default, so every kind's steps come due) are fed to one trail; printed:
CPU microseconds per board received (``time.process_time``, median of 5 runs), the ratio to
the baseline, and the cost of building one full answer of the slowest kind. Pinned to
``--cpu`` so nothing else shares the core.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from app.board.snapshot import Snapshot, dumps, parse_snapshot
from app.board.trail import WindowTrail
from app.bus.memory import MemoryBoardBus
from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource

RUNS = 5
START = 1_800_000_000.0  # a multiple of every kind's length but the Eastern 4-hour blocks'


def _boards(symbols: str, windows: str, count: int) -> list[Snapshot]:
    """``count`` boards of the simulated source, 500 ms apart on a driven clock."""
    clock = [START]
    source = SimulatedSource(parse_symbols(symbols), seed=1, spans=parse_windows(windows))
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=lambda: clock[0])
    boards = []
    for i in range(count):
        clock[0] = START + i * 0.5
        boards.append(parse_snapshot(dumps(refresher.build())))
    return boards


def _per_board_us(boards: list[Snapshot]) -> tuple[float, float]:
    """(median CPU µs per board added, CPU ms of one answer of the last kind) over RUNS."""
    adds, answers = [], []
    for _ in range(RUNS):
        trail = WindowTrail(3000)
        start = time.process_time()
        for board in boards:
            trail.add(board)
        adds.append((time.process_time() - start) / len(boards) * 1e6)
        start = time.process_time()
        trail.answer(1000, None, "5m")
        answers.append((time.process_time() - start) * 1e3)
    return statistics.median(adds), statistics.median(answers)


def main() -> None:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.trail")
    parser.add_argument("--symbols", default="BTC,ETH,SOL,XRP")
    parser.add_argument("--windows", nargs="+", default=["5m", "5m,15m,1h,4h"])
    parser.add_argument("--boards", type=int, default=2400)
    parser.add_argument("--cpu", type=int, default=1)
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    baseline = None
    print(f"{args.symbols}, {args.boards} boards 500 ms apart, pinned to CPU {args.cpu}")
    print("WINDOWS          µs/board   ratio   one 5m answer (ms)")
    for windows in args.windows:
        per_board, answer_ms = _per_board_us(_boards(args.symbols, windows, args.boards))
        baseline = baseline or per_board
        print(f"{windows:<16} {per_board:8.1f}   {per_board / baseline:5.2f}   {answer_ms:8.2f}")


if __name__ == "__main__":
    main()
