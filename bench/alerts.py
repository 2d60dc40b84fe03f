"""Alerts at scale, in the production shape (issue 51, point 6): ``make bench-alerts``.

    python -m bench.alerts [--alerts 10000] [--firing 1000] [--workers 4] [--rounds 3]

On this machine: a Redis and a scratch PostgreSQL database of the bench's own, the alerts
program (``python -m app.alerts``) and ``--workers`` delivery workers as processes, a
receiver on loopback (``ALERTS_ALLOWED_HOSTS=127.0.0.1``), and ``--alerts`` alerts of one
account spread over 4 markets x 2 windows (written to the table directly, secrets sealed as
the API seals them). ``--firing`` of them are BTC 5-minute P(up) lines between 41 and 59;
the rest are lines above 90 on the 7 other markets, which the bench's boards (every other
row at P(up) 50) never cross.

First, the refresher's publish path with the program off and on, in the same run: a real
refresher (simulated source, 4 markets x 2 windows) publishes for ``--seconds``, first
without the alerts program and its workers, then with them. In both phases the bench adds
a change every 2 s that fires the ``--firing`` lines (``bench.alerts_publish``), so the
program's work is about the same from run to run (the refresher's own boards fire a few
more as its path moves). Measured: each refresher board's build to its arrival at a
subscriber in this process (p50, and the max: 40 boards are too few for a p99), and its
boards a second, published (its own /metrics) and received here. (Its
``probboard_refresher_publish_delay_seconds`` is no measure here: with the simulated
source, the newest input is the build itself.)

Then the rounds, the refresher stopped and the earlier calls all in: each publishes a board
at P(up) 30, then one at 60 (the change); the time from that board's publication to each
call's arrival at the receiver gives p50, p99 and the last (target: p99 under 1 s), counted
on exactly the webhook-ids the change must call.

Pinned (``taskset``): the alerts program, its workers and Redis on CPU 0; the refresher, the
receiver (nginx) and this process on CPU 1, so the "on" phase carries the calls' arrivals
beside the refresher too.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import create_engine, insert

from app.alerts.models import Alert
from app.alerts.records import delivery_id_of
from app.alerts.secrets import SecretBox, new_secret
from app.board.snapshot import dumps, parse_snapshot
from app.bus.memory import MemoryBoardBus
from app.bus.redis_bus import RedisBoardBus
from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from bench.alerts_publish import PublishLags, percentile, set_p_up
from bench.receivers import Arrivals, NginxReceiver, PythonReceiver
from harness import accounts
from harness.ports import free_port
from harness.processes import (
    BIN,
    TEST_PEPPER,
    Process,
    RedisServer,
    on_cpus,
    port_open,
    service_env,
    wait_until,
)

SYMBOLS, WINDOWS = "BTC,ETH,SOL,XRP", "5m,15m"


def _id(n: int) -> str:
    """The bench's alert number ``n``."""
    return f"al_bench{n:06d}"


def _alerts(database_url: str, account_id: int, url: str, total: int, firing: int) -> None:
    """``total`` alerts, ``firing`` of them BTC 5m lines crossed by 40 -> 60; the rest lines
    above 90 on the other 7 markets' rows (on BTC 5m, the bench's P(up) 30 would re-arm them
    and the refresher's path past 90 fire them again: work that varies from run to run)."""
    box, secret = SecretBox(TEST_PEPPER.encode()), new_secret()
    sealed = box.seal(secret)
    markets = [(s, w) for s in SYMBOLS.split(",") for w in WINDOWS.split(",")]
    markets.remove(("BTC", "5m"))
    now = datetime.now(UTC).replace(tzinfo=None)
    rows = []
    for i in range(total):
        if i < firing:
            symbol, window, level = "BTC", "5m", 41.0 + 18.0 * i / max(1, firing - 1)
        else:
            symbol, window = markets[i % len(markets)]
            level = 90.0 + (i % 9)
        rows.append({
            "id": _id(i), "account_id": account_id, "url": url, "symbol": symbol,
            "window": window, "condition": "p_up_above", "level": level, "side": None,
            "format": "json", "status": "active", "paused_reason": None,
            "secret_encrypted": sealed, "failures": 0, "created_at": now, "updated_at": now,
        })  # fmt: skip
    engine = create_engine(database_url)
    with engine.begin() as conn:
        conn.execute(insert(Alert), rows)
    engine.dispose()


def _boards(p_ups: list[float]) -> list[str]:
    """Boards of 4 markets x 2 windows built now, BTC 5m's P(up) set to each of ``p_ups``,
    every other row's to 50: the simulated path may be past 90 on a market, and its firings
    would load the workers under the change's (as they did every run's first round until
    2026-11-30)."""
    source = SimulatedSource(parse_symbols(SYMBOLS), seed=2, spans=parse_windows(WINDOWS))
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=time.time)
    found = []
    for p_up in p_ups:
        document = refresher.build()
        set_p_up(document, p_up, others=50.0)
        found.append(dumps(document))
    return found


def _quiet(receiver: Arrivals, still_s: float = 2.0, timeout_s: float = 60.0) -> None:
    """Wait until no call has come for ``still_s``: the firings of earlier boards are in."""
    deadline, seen = time.monotonic() + timeout_s, -1
    while (now := len(receiver.arrivals())) != seen and time.monotonic() < deadline:
        seen = now
        time.sleep(still_s)


def _arrived(receiver: Arrivals, expected: set[str], timeout_s: float = 30.0) -> list[float]:
    """The arrivals of the calls ``expected`` (their webhook-ids), once all came."""
    deadline = time.monotonic() + timeout_s
    while True:
        time.sleep(0.2)  # read in batches: a Python receiver's threads share this process
        seen = receiver.arrivals()
        if expected <= seen.keys() or time.monotonic() > deadline:
            return [seen[i] for i in expected if i in seen]


def _boards_total(port: int) -> float:
    """The refresher's boards published so far, from its /metrics."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith("probboard_refresher_boards_total "):
            return float(line.split()[-1])
    raise RuntimeError("the refresher's /metrics has no probboard_refresher_boards_total")


def _ratio(on: float, off: float) -> float | None:
    """``on / off`` to 2 decimals; None when ``off`` is 0 or not a number."""
    return round(on / off, 2) if off and not math.isnan(off) else None


def _stop(processes: list[Process]) -> None:
    """Stop ``processes`` (each once: the list is emptied)."""
    while processes:
        processes.pop().stop()


@contextlib.contextmanager
def _stopping(processes: list[Process]) -> Iterator[None]:
    """Stop ``processes`` on the way out of the ``with``."""
    try:
        yield
    finally:
        _stop(processes)


def main() -> None:
    """Run the bench; print its figures (see the module docstring)."""
    parser = argparse.ArgumentParser(prog="python -m bench.alerts")
    parser.add_argument("--alerts", type=int, default=10_000)
    parser.add_argument("--firing", type=int, default=1_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument(
        "--receiver", choices=("nginx", "python"), default="nginx",
        help="nginx (its own process on CPU 1) or the tests' Python receiver in this process",
    )  # fmt: skip
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-alerts-"))
    redis = RedisServer(work, cpus="0")
    redis.start()
    processes: list[Process] = []
    try:
        receiving: NginxReceiver | PythonReceiver = (
            NginxReceiver(work, cpus="1") if args.receiver == "nginx" else PythonReceiver()
        )
        # Left in reverse: the processes stop before the receiver and the scratch database
        # go (they read it to the end), also when the bench fails.
        with (
            accounts.scratch_accounts() as env_db,
            receiving as receiver,
            _stopping(processes),
        ):
            accounts.create_user(env_db, "bench", "vip_pro")
            database_url = env_db["DATABASE_URL"]
            engine = create_engine(database_url)
            with engine.connect() as conn:
                account_id = conn.exec_driver_sql("SELECT id FROM accounts").scalar_one()
            engine.dispose()
            _alerts(database_url, account_id, receiver.url, args.alerts, args.firing)
            env = service_env(
                REDIS_URL=redis.url, DATABASE_URL=database_url, SYMBOLS=SYMBOLS,
                WINDOWS=WINDOWS, ALERTS_ALLOWED_HOSTS="127.0.0.1",
                ALERTS_DELIVERIES_PER_MINUTE="1000000", LOG_LEVEL="WARNING",
            )  # fmt: skip
            metrics_port = free_port()
            refresher_env = dict(env, REFRESHER_METRICS_PORT=str(metrics_port))
            refresher = Process(on_cpus([str(BIN / "python"), "-m", "app.refresher"], "1"),
                                refresher_env, work / "refresher.log")  # fmt: skip
            processes.append(refresher)
            if not wait_until(lambda: port_open(metrics_port), timeout=20):
                raise RuntimeError(f"the refresher did not start:\n{refresher.output()}")
            os.sched_setaffinity(0, {1})  # beside the refresher, apart from the alerts
            bus = RedisBoardBus(redis.url)
            lags = PublishLags(bus)
            bus.add_listener(lags)
            bus.start()
            time.sleep(2)
            off = lags.window(lambda: _boards_total(metrics_port), args.seconds)
            program = Process(on_cpus([str(BIN / "python"), "-m", "app.alerts"], "0"), env,
                              work / "program.log")  # fmt: skip
            processes.append(program)
            for n in range(args.workers):
                processes.append(Process(
                    on_cpus([str(BIN / "python"), "-m", "app.alerts", "worker"], "0"), env,
                    work / f"worker-{n}.log",
                ))  # fmt: skip
            time.sleep(4)  # the program reads 10,000 alerts and subscribes
            calls_before = len(receiver.arrivals())
            on = lags.window(lambda: _boards_total(metrics_port), args.seconds)
            on["calls_received"] = len(receiver.arrivals()) - calls_before  # the program at work
            lags.loading = False
            refresher.stop()  # its boards would move BTC's line under the rounds
            processes.remove(refresher)
            time.sleep(3)
            # The receiver (nginx, or this process's threads) is on CPU 1, apart from the
            # program, the workers and Redis on CPU 0: the load apart from what it measures.
            delays: list[float] = []
            firsts: list[float] = []  # each round's first arrival: the program's share
            _quiet(receiver)  # the calls the refresher's boards fired, all in before a round
            for round_ in range(args.rounds):
                before, change = _boards([30.0, 60.0])  # 30: every line re-armed
                # The webhook-ids the change must call (made as every alerts program makes them).
                snapshot = parse_snapshot(change)
                expected = {delivery_id_of(_id(i), snapshot) for i in range(args.firing)}
                bus.publish(before)
                time.sleep(0.5)
                published = time.time()
                bus.publish(change)
                arrived = sorted((at - published) * 1000 for at in _arrived(receiver, expected))
                delays += arrived
                firsts.append(arrived[0] if arrived else 0.0)
                print(f"round {round_ + 1}: {len(arrived)} of {args.firing} calls arrived, "
                      f"the first after {firsts[-1]:.0f} ms")  # fmt: skip
                time.sleep(1)
            bus.close()
            print(json.dumps({
                "alerts": args.alerts, "firing": args.firing, "workers": args.workers,
                "rounds": args.rounds, "calls": len(delays),
                "board_to_receiver_ms": {
                    "p50": round(statistics.median(delays), 1),
                    "p99": round(percentile(delays, 0.99), 1),
                    "max": round(max(delays), 1),
                    "first": round(statistics.median(firsts), 1),
                } if delays else None,
                "refresher_board_to_subscriber_ms": {
                    "off": off, "on": on,
                    "ratio_p50": _ratio(on["p50_ms"], off["p50_ms"]),
                    "ratio_max": _ratio(on["max_ms"], off["max_ms"]),
                },
            }, indent=2))  # fmt: skip
    finally:
        _stop(processes)
        redis.stop()


if __name__ == "__main__":
    main()
