"""Refresher latency: from a change at the (fake) upstream to the board being published.

Starts the fake Polymarket upstreams (harness/fake_polymarket/), a redis-server and
the refresher process with ``BOARD_SOURCE=polymarket``; subscribes to the board channel;
then, N times, moves the UP token's best bid at the fake CLOB (a ``price_change`` over its
WebSocket) and measures the time until a published board carries the new bid. The
baseline of the same run is the refresher's tick: a change waits for the next tick, so
about half a tick is the floor.

    python -m bench.refresher [--changes 40]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import redis

from app.bus.redis_bus import BOARD_CHANNEL
from harness.fake_polymarket import FakePolymarket
from harness.processes import BIN, ROOT, Process, RedisServer, service_env
from harness.spans import window_start

RESULTS = ROOT / "bench" / "results.json"


def quantile(values: list[float], fraction: float) -> float:
    """Nearest-rank quantile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def main() -> int:
    """Run the measurement and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--changes", type=int, default=40)
    parser.add_argument("--tick-ms", type=int, default=500)
    args = parser.parse_args()

    latencies: list[float] = []
    with tempfile.TemporaryDirectory(prefix="probboard-bench-refresher-") as tmp:
        workdir = Path(tmp)
        world = FakePolymarket(auto_markets=True).start()
        world.rtds.live()
        world.clob_ws.keep_alive()
        server = RedisServer(workdir)
        server.start()
        env = service_env(REDIS_URL=server.url, REFRESH_TICK_MS=str(args.tick_ms), **world.env())
        refresher = Process([str(BIN / "flask"), "--app", "wsgi", "refresher"], env,
                            workdir / "refresher.log")  # fmt: skip
        try:
            pubsub = redis.Redis.from_url(server.url).pubsub()  # type: ignore[no-untyped-call]
            pubsub.subscribe(BOARD_CHANNEL)

            def next_board(timeout: float) -> dict[str, Any] | None:
                message = pubsub.get_message(ignore_subscribe_messages=True, timeout=timeout)
                return json.loads(message["data"]) if message else None

            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                board = next_board(1.0)
                if board and board["items"][0].get("up_bid") is not None:
                    break
            else:
                raise RuntimeError(f"no live board:\n{refresher.output()[-2000:]}")
            for i in range(args.changes):
                market = world.market(window_start(time.time()))
                assert market is not None
                bid, ask = world.best(market.up_token)
                assert bid is not None and ask is not None
                # One tick above the best bid (when the spread allows) moves the best bid.
                price = f"{bid + 0.01:.2f}" if bid + 0.015 < ask else f"{bid:.2f}"
                world.set_level(
                    market.up_token, "BUY", price, "100" if price != f"{bid:.2f}" else "0"
                )
                expected = world.best(market.up_token)[0]
                changed = time.monotonic()
                while time.monotonic() - changed < 5:
                    board = next_board(0.5)
                    if board and board["items"][0].get("up_bid") == expected:
                        latencies.append((time.monotonic() - changed) * 1000)
                        break
                time.sleep(0.3 + (i % 7) * 0.05)  # land the next change at another phase
        finally:
            refresher.stop()
            server.stop()
            world.stop()

    if not latencies:
        print("bench: no change reached a board", file=sys.stderr)
        return 1
    row = {
        "changes": args.changes,
        "seen": len(latencies),
        "tick_ms": args.tick_ms,
        "p50_ms": statistics.median(latencies),
        "p99_ms": quantile(latencies, 0.99),
        "max_ms": max(latencies),
        "p50_over_tick": statistics.median(latencies) / args.tick_ms,
    }
    print(f"{'changes':>8} {'seen':>5} {'tick ms':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
          f"{'p50/tick':>8}")  # fmt: skip
    print(f"{row['changes']:>8} {row['seen']:>5} {row['tick_ms']:>8} {row['p50_ms']:>7.0f} "
          f"{row['p99_ms']:>7.0f} {row['max_ms']:>7.0f} {row['p50_over_tick']:>8.2f}")  # fmt: skip
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["refresher"] = row
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
