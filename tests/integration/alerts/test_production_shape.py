"""The alerts program and its RQ workers as processes (issue 51, points 2, 3 and 5): boards on
a real Redis channel, the accounts on PostgreSQL, a real receiver on loopback.

- A crossing reaches the receiver, signed, through the queue and a worker.
- A worker killed mid-call: the delivery is queued again by the program's sweep and made by
  another worker, under the same ``webhook-id`` (at least once, nothing lost).
- Redis restarted with a delivery queued and no worker: the sweep queues it again once a
  worker is back; the program's subscription comes back by itself.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask
from standardwebhooks.webhooks import Webhook

from app.board.snapshot import dumps
from app.bus.redis_bus import RedisBoardBus
from app.web import create_app
from harness.clocks import OffsetClock
from harness.databases import empty_tables
from harness.processes import BIN, Process, RedisServer, service_env, wait_until
from harness.receiver import Receiver
from tests.conftest import BASE_CONFIG
from tests.integration.alerts.test_delivery import create, settled
from tests.unit.test_cors import key_of

LOST_AFTER_S = 2


@pytest.fixture
def shape(
    postgres_database: str, fresh_redis: RedisServer, tmp_path: Path, board_clock: OffsetClock
) -> Iterator[dict[str, Any]]:
    """The accounts app (to make alerts), the env of the program and the workers."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": postgres_database,
                      "ALERTS_ALLOWED_HOSTS": "127.0.0.1"})  # fmt: skip
    env = service_env(
        REDIS_URL=fresh_redis.url,
        DATABASE_URL=postgres_database,
        ALERTS_ALLOWED_HOSTS="127.0.0.1",
        ALERTS_LOST_AFTER_S=str(LOST_AFTER_S),
        # Every record the HTTP libraries make (httpcore's are DEBUG): none may name the target.
        LOG_LEVEL="DEBUG",
        **board_clock.env(),  # the boards' clock (this test's): no window ends meanwhile
    )
    processes: list[Process] = []

    def start(*role: str) -> Process:
        name = "-".join(role) or "program"
        process = Process([str(BIN / "python"), "-m", "app.alerts", *role], env,
                          tmp_path / f"{name}-{len(processes)}.log")  # fmt: skip
        processes.append(process)
        return process

    try:
        yield {"app": app, "start": start, "redis": fresh_redis}
    finally:
        for process in processes:
            process.stop()
        with app.app_context():
            from app.extensions import db

            db.engine.dispose()
        empty_tables(postgres_database)


def ready(program: Process) -> None:
    """Wait until ``program`` has read the alert and subscribed (a board published before
    would be lost to it: pub/sub keeps nothing)."""
    assert wait_until(
        lambda: (
            "alerts: 1 watched" in program.output()
            and "board subscription established" in program.output()
        ),
        timeout=30,
    ), program.output()


def publish(redis_url: str, p_ups: list[float]) -> None:
    """Boards with BTC's P(up) at each of ``p_ups`` on the Redis channel, 100 ms apart."""
    from tests.integration.alerts.test_delivery import boards

    bus = RedisBoardBus(redis_url)
    try:
        for board in boards(p_ups):
            bus.publish(dumps(board.document))
            time.sleep(0.1)
    finally:
        bus.close()


def test_a_crossing_goes_through_the_queue_signed_and_survives_a_killed_worker(
    shape: dict[str, Any],
) -> None:
    app: Flask = shape["app"]
    vic = key_of(app, "vic", "vip_pro")
    with Receiver() as receiver:
        made = create(app, vic, receiver.url)
        alert_id, secret = made["alert"]["id"], made["secret"]
        program = shape["start"]()
        workers = [shape["start"]("worker"), shape["start"]("worker")]
        ready(program)
        redis_url = shape["redis"].url
        publish(redis_url, [55.0, 64.0])
        [call] = receiver.wait(1, timeout_s=15)
        headers = {k.lower(): v for k, v in call.headers.items()}
        Webhook(secret).verify(call.body, headers)
        [done] = settled(app, vic, alert_id, 1)
        assert (done["status"], done["attempts"]) == ("delivered", 1), done

        # A worker killed mid-call: the receiver hangs, both workers die, a new one starts.
        receiver.hang_s = 3.0
        publish(redis_url, [55.0, 64.0])
        calls = receiver.wait(2, timeout_s=15)
        assert len(calls) == 2, [w.output() for w in workers]
        for worker in workers:
            worker.signal(signal.SIGKILL)
        receiver.hang_s = 0.0
        shape["start"]("worker")
        calls = receiver.wait(3, timeout_s=LOST_AFTER_S + 15)
        assert len(calls) >= 3, program.output()
        second = calls[1].headers["webhook-id"]
        assert calls[2].headers["webhook-id"] == second  # the same delivery, at least once
        found = settled(app, vic, alert_id, 2)
        mine = next(d for d in found if d["id"] == second)
        assert mine["status"] == "delivered", found
        assert program.alive()
    # Nothing of the target or the secret in any log.
    for process in (program, *workers):
        text = process.output()
        assert secret not in text and receiver.url not in text and "/hook" not in text, text


def test_redis_restarted_with_a_delivery_queued(shape: dict[str, Any]) -> None:
    app: Flask = shape["app"]
    vic = key_of(app, "vic", "vip_pro")
    server: RedisServer = shape["redis"]
    with Receiver() as receiver:
        made = create(app, vic, receiver.url)
        program = shape["start"]()
        ready(program)
        publish(server.url, [55.0, 64.0])  # queued: no worker runs
        assert wait_until(lambda: len(settled(app, vic, made["alert"]["id"], 0)) == 1, 10)
        server.restart()  # no persistence: the queue is gone with it
        worker = shape["start"]("worker")
        calls = receiver.wait(1, timeout_s=LOST_AFTER_S + 20)
        found = settled(app, vic, made["alert"]["id"], 0)
        assert len(calls) == 1, (found, program.output(), worker.output())
        [call] = calls
        Webhook(made["secret"]).verify(call.body, {k.lower(): v for k, v in call.headers.items()})
        # The subscription came back: a new crossing is delivered as well.
        publish(server.url, [55.0, 64.0])
        assert len(receiver.wait(2, timeout_s=15)) == 2, program.output()
