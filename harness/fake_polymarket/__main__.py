"""``python -m harness.fake_polymarket``: every fake, live until Ctrl-C (manual checks,
benchmarks)."""

from __future__ import annotations

import contextlib
import threading

from harness.fake_polymarket import CHAINLINK_SYMBOLS, TWAP, running


def main() -> None:
    """``python -m harness.fake_polymarket``: live fakes until Ctrl-C (manual checks,
    benchmarks); prints the environment that points the service at them. Every window of
    every market is listed, settled on the 60-second TWAP as today's markets are, and every
    market's Chainlink stream is live (``SYMBOLS=BTC,ETH,SOL,XRP`` gets four rows)."""
    with running(auto_markets=True, auto_rule=TWAP) as world:
        for symbol in CHAINLINK_SYMBOLS:
            world.rtds.live(symbol=symbol)
        world.clob_ws.keep_alive(0.1)
        for name, value in world.env().items():
            print(f"export {name}={value}", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            threading.Event().wait()


if __name__ == "__main__":
    main()
