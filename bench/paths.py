"""The model on simulated paths of each kind and rule, replayed through the live source.

For each path (``brownian``: a Brownian spot of known sigma; ``feed``: the settlement-feed
stand-in, ``harness/settlement_feed.py``, its points sent at its own lags with its gaps) and
each rule (``spot``, ``twap30``, ``twap60``), a tape of ``--hours`` of windows is written
(``harness/tapes.py``; the books quote the Brownian formula, the outcomes are the path's own)
and replayed by the backtest (``python -m app.backtest --json``) in a process of its own:

- with the working tree's code ("now");
- with ``--baseline DIR``, also with another checkout's code on the same tapes ("before"),
  e.g. a worktree of the commit before a model change: the baseline of the same run.

Printed per (path, rule): the log loss at each checkpoint and over all, the share of
checkpoints with a probability, and the tails (where it said < 10 % / > 90 %: the mean said
and how often UP came). On Brownian paths, the exact model's log loss at the same
checkpoints (the path and the true sigma, ``harness.tapes.exact_p_up``) is printed beside:
the floor no model can beat. The stand-in has no closed form: its figures compare the model
with itself before and with the market's own rule, not with an exact answer.

    python -m bench.paths [--hours 6] [--seed 1] [--paths brownian,feed]
                          [--rules spot,twap30,twap60] [--baseline DIR] [--jobs 2]
                          [--json OUT] [--window 5m|15m]

``--window 15m``: tapes of 15-minute windows (``--hours`` of them), scored at the 15-minute
checkpoints (870 ... 5 s left; issue 39); the exact model at the 15-minute window's end.
``--window 4h``: Eastern 4-hour blocks from the first after T0 (``--hours 48`` gives 12),
scored at their checkpoints (14,100 ... 5 s left; issue 49). ``--window 1h``: hourly windows
settled on Binance's candle: the tapes add the exchange price on ``crypto_prices`` (the spot
times the fakes' basis, to the cent) and Binance's answers for each candle; every hourly
window is resolved by its market (the only way one settles); run it with ``--rules spot``
(the rule is the candle's whatever the flag says).

Nothing is pinned: the replays share the cores; their time is not a figure here.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from app.backtest.report import document_of
from app.markets import BINANCE_CANDLE, SPANS
from bench.real import block, figures
from harness.fake_polymarket import SPOT, TWAP, BrownianPath
from harness.paths import SeededPath
from harness.processes import BIN, ROOT
from harness.settlement_feed import FEED_SIGMA, SettlementFeedPath
from harness.spans import REMS_OF_WINDOW
from harness.tapes import TapeSpec, exact_p_up, write

T0 = 1_800_000_000
BROWNIAN_SIGMA = 1.2e-4
RULES = {"spot": (SPOT, 60), "twap30": (TWAP, 30), "twap60": (TWAP, 60)}
PATHS = ("brownian", "feed")
OUTCOME = "computed"  # the key bench.real's figures read


def _spec(kind: str, rule: str, seed: int, hours: float, window: str) -> TapeSpec:
    span = SPANS[window]
    windows = int(hours * 3600 // span.seconds)
    # T0 starts a 5- and 15-minute window and an hour, not an Eastern 4-hour block: then the
    # next block's start.
    first = T0 if span.start(T0) == T0 else span.end(span.start(T0))
    start, seconds = first - 2400, windows * span.longest_s + 3000
    path: SeededPath
    if kind == "brownian":
        path = BrownianPath(seed, BROWNIAN_SIGMA, 100_000, start, seconds)
        return TapeSpec(path, BROWNIAN_SIGMA, first, windows, rule=RULES[rule][0],
                        lookback=RULES[rule][1], spans=(span,))  # fmt: skip
    path = SettlementFeedPath(seed, FEED_SIGMA, 100_000, start, seconds)
    return TapeSpec(path, FEED_SIGMA, first, windows, rule=RULES[rule][0], lookback=RULES[rule][1],
                    arrivals="feed", spans=(span,))  # fmt: skip


def _replay(tree: Path, tape: Path, window: str) -> dict[str, Any]:
    """The backtest's document of ``tape``'s ``window`` windows with the code of ``tree``."""
    python = BIN / "python"
    done = subprocess.run(
        [str(python), "-m", "app.backtest", "--json", str(tape)],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=3 * 3600,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"backtest in {tree} of {tape}: {done.stderr[-2000:]}")
    report: dict[str, Any] = json.loads(done.stdout)
    if window == "5m" and "perWindow" in report:
        return report  # the shape of any checkout's report of a one-market 5-minute tape
    return document_of(report, window)


def _with_p(report: dict[str, Any]) -> set[tuple[str, int]]:
    """(slug, rem) of every checkpoint with a probability."""
    return {
        (w["slug"], c["remS"])
        for w in report["perWindow"]
        for c in w["checkpoints"]
        if c["pUp"] is not None
    }


def _windows(
    report: dict[str, Any], spec: TapeSpec, exact: bool, only: set[tuple[str, int]] | None = None
) -> list[dict[str, Any]]:
    """The report's windows as bench.real scores them; with ``exact``, each checkpoint's
    probability replaced by the exact one (where the model had one); with ``only``, the
    checkpoints outside it left without one (to compare codes on the same checkpoints)."""
    found = []
    for window in report["perWindow"]:
        checkpoints = []
        for c in window["checkpoints"]:
            p = c["pUp"] if only is None or (window["slug"], c["remS"]) in only else None
            if exact and p is not None:
                # The board at end - rem knows the spot up to the second before (a 4-hour
                # block across a change of clocks: its own length).
                span = spec.spans[0]
                length = span.end(window["windowStart"]) - window["windowStart"]
                second = window["windowStart"] + length - c["remS"] - 1
                # The hourly kind settles on the candle: close >= open, the spot rule.
                rule = SPOT if span.settlement == BINANCE_CANDLE else spec.rule
                p = exact_p_up(spec.path, rule, spec.lookback, window["windowStart"],
                               second, spec.sigma, length)  # fmt: skip
            checkpoints.append({"remS": c["remS"], "pUp": p})
        found.append({OUTCOME: window["outcome"], "checkpoints": checkpoints})
    return found


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=6.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--rules", default=",".join(RULES))
    parser.add_argument("--baseline", type=Path, help="another checkout: the model before")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--json", dest="json_out", type=Path)
    parser.add_argument("--window", choices=list(REMS_OF_WINDOW), default="5m")
    args = parser.parse_args()
    for name in args.paths.split(","):
        if name not in PATHS:
            parser.error(f"--paths: {name!r} is not one of {', '.join(PATHS)}")
    for name in args.rules.split(","):
        if name not in RULES:
            parser.error(f"--rules: {name!r} is not one of {', '.join(RULES)}")
    if args.baseline is not None and not (args.baseline / "app" / "backtest").is_dir():
        parser.error(f"--baseline {args.baseline}: not a checkout of probboard")
    return args


def main() -> int:
    """Write the tapes, replay them (now, and before), print and keep the figures."""
    args = _arguments()
    trees = {"now": ROOT, **({"before": args.baseline} if args.baseline else {})}
    cases = [(p, r) for p in args.paths.split(",") for r in args.rules.split(",")]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="probboard-bench-paths-") as tmp:
        specs = {
            case: _spec(case[0], case[1], args.seed, args.hours, args.window) for case in cases
        }
        tapes = {
            case: write(spec, Path(tmp) / f"{case[0]}-{case[1]}") for case, spec in specs.items()
        }
        jobs = [(case, name) for case in cases for name in trees]
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            done = pool.map(lambda job: _replay(trees[job[1]], tapes[job[0]], args.window), jobs)
            reports = dict(zip(jobs, done, strict=True))
    rems = SPANS[args.window].rems

    def scored(windows: list[dict[str, Any]]) -> dict[str, Any]:
        return figures(windows, OUTCOME, rems)

    for case in cases:
        key = f"{case[0]} {case[1]}"
        results[key] = {}
        print(f"\n== {key}: {args.hours:g} h of {args.window} windows, seed {args.seed} ==")
        for name in trees:
            found = scored(_windows(reports[case, name], specs[case], exact=False))
            results[key][name] = found
            print("\n".join(block(f" the model, {name}", found)))
        if len(trees) > 1:  # both codes on the checkpoints where both had a probability
            common = set.intersection(*(_with_p(reports[case, name]) for name in trees))
            for name in trees:
                windows = _windows(reports[case, name], specs[case], exact=False, only=common)
                found = scored(windows)
                results[key][f"{name}, common"] = found
                print("\n".join(block(f" the model, {name}, checkpoints both scored", found)))
        if case[0] == "brownian":
            exact = scored(_windows(reports[case, "now"], specs[case], exact=True))
            results[key]["exact"] = exact
            print("\n".join(block(" the exact model, at the same checkpoints", exact)))
    _summary(results, trees, rems)
    if args.json_out:
        args.json_out.write_text(json.dumps(results, indent=1))
    return 0


def _summary(results: dict[str, Any], trees: dict[str, Path], rems: tuple[int, ...]) -> None:
    """One line per (path, rule) and code: log loss at each checkpoint and over all."""
    names = [*trees, *(f"{name}, common" for name in trees), "exact"]
    header = " ".join(f"{r:>5}" for r in rems)
    print(f"\nlog loss per checkpoint (s left):        {header}   all")
    for key, found in results.items():
        for name in names:
            if name not in found:
                continue
            cells = [b["model"]["logLoss"] for b in found[name]["buckets"]]
            text = " ".join("    —" if v is None else f"{v:5.3f}" for v in cells)
            with_p = found[name]["withP"]
            share = "" if with_p is None else f"  ({100 * with_p:.0f} % with p)"
            print(f"  {key:<16} {name:<14} {text}{share}")


if __name__ == "__main__":
    sys.exit(main())
