"""How fast does a backtest replay a tape? Tape seconds per second of replay, on one core.

Writes a synthetic tape of a Brownian market (``harness/tapes.py``: the spot and both TWAP
topics every second, each window's books and quotes, its Gamma answer and, for every other
window, its ``market_resolved``), then, pinned to one CPU (``taskset``-style
``sched_setaffinity``), times in the same run:

- the baseline: reading the tape (every line parsed as JSON, files merged in ``t`` order);
- the backtest: the same lines replayed through the live source and scored.

The target is 200x real time (a day of tape in about 7 minutes).

    python -m bench.backtest [--hours 6] [--cpu 0] [--rounds 2] [--quote-hz 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from app.backtest.report import backtest
from app.backtest.tapes import read_tapes
from harness.fake_polymarket import TWAP, BrownianPath
from harness.processes import ROOT
from harness.spans import WINDOW_S
from harness.tapes import TapeSpec, write

RESULTS = ROOT / "bench" / "results.json"
T0 = 1_800_000_000
TARGET = 200.0


def main() -> int:
    """Write the tape, time both, print the table and keep it in bench/results.json."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--cpu", type=int, default=0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--quote-hz", type=int, default=10, help="best_bid_ask messages per second per token"
    )
    args = parser.parse_args()
    if args.cpu not in os.sched_getaffinity(0):
        print(f"bench: CPU {args.cpu} is not available to this process", file=sys.stderr)
        return 2
    os.sched_setaffinity(0, {args.cpu})
    windows = max(1, int(args.hours * 3600 // WINDOW_S))
    path = BrownianPath(1, 1.2e-4, 100_000, T0 - 2400, windows * WINDOW_S + 3000)
    with tempfile.TemporaryDirectory(prefix="probboard-backtest-") as tmp:
        spec = TapeSpec(path, 1.2e-4, T0, windows, rule=TWAP, quote_hz=args.quote_hz)
        folder = write(spec, Path(tmp))
        size = sum(p.stat().st_size for p in folder.iterdir())
        reads, replays = [], []
        doc: dict[str, object] = {}
        for _ in range(args.rounds):
            started = time.perf_counter()
            lines = sum(1 for _ in read_tapes([folder]))
            reads.append(time.perf_counter() - started)
            started = time.perf_counter()
            doc = backtest(read_tapes([folder]))
            replays.append(time.perf_counter() - started)
    replay = doc["replay"]
    assert isinstance(replay, dict)
    tape_s = float(replay["tapeSeconds"])
    read_s, replay_s = statistics.median(reads), statistics.median(replays)
    speed = tape_s / replay_s
    print(
        f"tape: {tape_s / 3600:.1f} h, {windows} windows, {lines} lines "
        f"({lines / tape_s:.0f} a second; quotes at {args.quote_hz} Hz per token), "
        f"{size / 1e6:.1f} MB"
    )
    print(f"{'step':<28} {'seconds':>8} {'x real time':>12} {'ratio to reading':>17}")
    print(f"{'read the tape (baseline)':<28} {read_s:>8.2f} {tape_s / read_s:>12.0f} {1:>17.2f}")
    print(f"{'backtest (replay + scores)':<28} {replay_s:>8.2f} {speed:>12.0f} "
          f"{replay_s / read_s:>17.2f}")  # fmt: skip
    print(
        f"target {TARGET:.0f}x real time: {'met' if speed >= TARGET else 'MISSED'}; "
        f"one CPU ({args.cpu}), median of {args.rounds} rounds; "
        f"{replay['boards']} boards, a day of tape in about {86400 / speed / 60:.1f} min"
    )
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["backtest"] = {
        "tape_seconds": tape_s, "lines": lines, "bytes": size, "read_s": reads,
        "replay_s": replays, "speed": speed, "settings": vars(args),
    }  # fmt: skip
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
