"""``python -m harness.fake_polymarket``: every fake, live until Ctrl-C (manual checks,
benchmarks, the demo). Its books quote around the fair value of its own paths
(``quoting.FairQuoter``); ``--fixed-books`` keeps the fixed books instead."""

from __future__ import annotations

import argparse
import contextlib
import threading

from app.markets import MARKETS
from harness.fake_polymarket import TWAP, running
from harness.fake_polymarket.quoting import FairQuoter


def main(argv: list[str] | None = None) -> None:
    """``python -m harness.fake_polymarket [--fixed-books]``: live fakes until Ctrl-C;
    prints the environment that points the service at them. Every window of every market is
    listed, settled on the 60-second TWAP as today's markets are, every market's Chainlink
    stream is live (``SYMBOLS=BTC,ETH,SOL,XRP`` gets four rows) and its books move with its
    path, unless ``--fixed-books``."""
    parser = argparse.ArgumentParser(prog="python -m harness.fake_polymarket")
    parser.add_argument(
        "--fixed-books",
        action="store_true",
        help="keep every book at UP 0.53/0.55, DOWN 0.45/0.47 (tests that need fixed books)",
    )
    args = parser.parse_args(argv)
    with running(auto_markets=True, auto_rule=TWAP) as world:
        paths = {symbol: world.rtds.live(symbol=m.chainlink) for symbol, m in MARKETS.items()}
        world.clob_ws.keep_alive(0.1)
        quoter = None if args.fixed_books else FairQuoter(world, paths).start()
        for name, value in world.env().items():
            print(f"export {name}={value}", flush=True)
        try:
            with contextlib.suppress(KeyboardInterrupt):
                threading.Event().wait()
        finally:
            if quoter is not None:
                quoter.stop()


if __name__ == "__main__":
    main()
