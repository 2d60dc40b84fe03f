"""How often is the board stale on honest data? The false-alarm rate of the witnesses.

Plays the realistic world of issue 48 (``tests.support.upstream_faults.staged(feed=True)``:
the settlement-feed stand-in as the Chainlink spot with its honest TWAP reports, the exchange
price leading it at a wandering basis) against the real ``PolymarketSource`` on the real
clock, and samples the row four times a second. Nothing lies, so every stale sample is a
false alarm, and a fresh sample whose price, price to beat, books or identity is wrong is a
defect (the volatility and P(up) are left to the tests: their truth needs the path's law).

    python -m bench.false_alarms [--day quiet|jumpy] [--stretches 3] [--seconds 240]
                                 [--silent none|twap-reports|exchange]

``quiet``: the stand-in's own seconds only (its small jumps and repeats included);
``jumpy``: honest moves of 0.2-0.4 % within 2 s besides, one every 30 s on average (seeded).
Each stretch is one 5-minute window (a stage never crosses a roll), after a warm-up. Prints
the samples, the stale share with its reasons, and the fresh-and-wrong count. Real time:
``--stretches 3 --seconds 240`` takes about 13 minutes a day.
"""

from __future__ import annotations

import argparse
import collections
import random
import sys

from tests.support.upstream_faults import Sample, budget, staged

JUMP_EVERY_S = 30.0  # a jumpy day: the mean time between honest moves
JUMP_SIZES = (0.002, 0.004)  # uniform in this range, either sign
PRICE_PROBLEMS = ("price ", "priceToBeat", "book", "token", "slug", "windowStart", "settlement")


def honest_jumps(rng: random.Random, seconds: int) -> dict[int, float]:
    """Honest moves at Poisson times over ``seconds`` (from 5 s on, 3 s apart at least)."""
    found: dict[int, float] = {}
    at = 5.0
    while True:
        at += max(3.0, rng.expovariate(1 / JUMP_EVERY_S))
        if at >= seconds:
            return found
        found[int(at)] = rng.choice((1, -1)) * rng.uniform(*JUMP_SIZES)


def stretch(day: str, seconds: int, silent: str, seed: int) -> list[Sample]:
    """One window's samples of the realistic world."""
    with staged(budget(float(seconds)), feed=True) as stage:
        stage.start_with_silent(silent, 30.0)
        if day == "jumpy":
            stage.play_jumps(honest_jumps(random.Random(seed), seconds))
        return stage.watch(float(seconds))


def world_arguments(parser: argparse.ArgumentParser) -> None:
    """``--day quiet|jumpy`` and ``--silent none|twap-reports|exchange``: the world played."""
    parser.add_argument("--day", choices=("quiet", "jumpy"), default="quiet")
    parser.add_argument("--silent", choices=("none", "twap-reports", "exchange"), default="none")


def main(argv: list[str] | None = None) -> int:
    """Run the stretches and print the figures."""
    parser = argparse.ArgumentParser(prog="python -m bench.false_alarms")
    world_arguments(parser)
    parser.add_argument("--stretches", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=240)
    args = parser.parse_args(argv)
    samples: list[Sample] = []
    for n in range(args.stretches):
        samples += stretch(args.day, args.seconds, args.silent, seed=n)
    stale = [s for s in samples if not s.fresh]
    wrong = [
        s for s in samples if s.fresh and any(p.startswith(PRICE_PROBLEMS) for p in s.problems)
    ]
    reasons: collections.Counter[str] = collections.Counter()
    for sample in stale:
        for reason in sample.row.get("suspect") or ["(no reason given)"]:
            reasons[reason.split(":")[0] + ": " + reason.split(" is ")[-1][:40]] += 1
    print(f"day {args.day}, {args.silent} silent: {len(samples)} samples")
    print(f"stale {len(stale) / len(samples):.2%} ({len(stale)}); fresh and wrong {len(wrong)}")
    for reason, count in reasons.most_common(8):
        print(f"  {count:5d}  {reason}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
