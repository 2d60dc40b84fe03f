"""An alert fired on a board reaches its receiver signed, and its deliveries say what happened
(issue 51, points 2 and 3): the runner on boards built by the real refresher, the accounts
database (SQLite, then PostgreSQL) written through the API, a real receiver on loopback.

The signature is checked with the ``standardwebhooks`` library and the secret shown at
creation, as a receiver would.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import update
from sqlalchemy.engine import Engine
from standardwebhooks.webhooks import Webhook

from app.accounts.models import utcnow
from app.alerts import delivery
from app.alerts import runner as runner_module
from app.alerts.delivery import MAX_FAILURES, Deliverer, LocalDispatcher
from app.alerts.models import Alert
from app.alerts.runner import AlertsRunner, renderer_of
from app.alerts.secrets import SecretBox
from app.alerts.targets import AllowList
from app.board.snapshot import Snapshot, dumps, parse_snapshot
from app.bus.memory import MemoryBoardBus
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from harness.clocks import OffsetClock
from harness.processes import TEST_PEPPER
from harness.receiver import Receiver
from harness.spans import WINDOW_S, window_start
from tests.unit.test_cors import key_of

STALE_MS = 3000


def next_window_clock() -> OffsetClock:
    """A clock that reads 100 s into a window now (the next one's, on the real seconds): no
    window ends on it for 200 s."""
    return OffsetClock.reading(window_start(time.time()) + WINDOW_S + 100)


# The boards', the runner's and the calls' clock, so that no window ends, and no call
# expires, while a test runs: set anew at each test's start (``board_clock``, this folder's
# conftest). Set once at import, it ran on with the session, and a test minutes later could
# run near a window's end: a delivery it waited for expired first (CI, 2026-11-30).
CLOCK = next_window_clock()


def boards(p_ups: list[float], clock: OffsetClock | None = None) -> list[Snapshot]:
    """Boards of the simulated source built now on ``clock`` (the test's ``CLOCK``), BTC's
    P(up) set to each of ``p_ups`` (and P(down) its complement)."""
    clock = clock or CLOCK
    source = SimulatedSource(parse_symbols("BTC"), seed=3)
    refresher = Refresher(source, MemoryBoardBus(), 500, clock=clock)
    found = []
    for p_up in p_ups:
        document = refresher.build()
        item = document["items"][0]
        item["p_up_pct"], item["p_down_pct"] = p_up, round(100 - p_up, 2)
        found.append(parse_snapshot(dumps(document)))
    return found


def runner_of(app: Flask, engine: Engine) -> tuple[AlertsRunner, LocalDispatcher]:
    held = services_of(app)
    allowed = AllowList.parse(["127.0.0.1"])
    deliverer = Deliverer(engine, SecretBox(TEST_PEPPER.encode()), allowed, clock=CLOCK)
    dispatcher = LocalDispatcher(deliverer)
    render = renderer_of(held.renderer, CLOCK.now_ms)
    runner = AlertsRunner(engine, dispatcher, render, STALE_MS, per_minute=1000, clock=CLOCK)
    return runner, dispatcher


def create(app: Flask, key: str, url: str, **fields: Any) -> dict[str, Any]:
    body = {"url": url, "symbol": "BTC", "condition": "p_up_above", "level": 60, **fields}
    answer = app.test_client().post("/api/alerts", json=body, headers={"X-API-Key": key})
    assert answer.status_code == 201, answer.data
    found: dict[str, Any] = answer.get_json()
    return found


def deliveries(app: Flask, key: str, alert_id: str) -> list[dict[str, Any]]:
    answer = app.test_client().get(f"/api/alerts/{alert_id}/deliveries", headers={"X-API-Key": key})
    assert answer.status_code == 200, answer.data
    found: list[dict[str, Any]] = answer.get_json()["deliveries"]
    return found


def settled(app: Flask, key: str, alert_id: str, count: int) -> list[dict[str, Any]]:
    """The alert's deliveries once ``count`` are no longer pending (10 s at most)."""
    deadline = time.monotonic() + 10
    while True:
        found = deliveries(app, key, alert_id)
        done = [d for d in found if d["status"] != "pending"]
        if len(done) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def test_a_crossing_is_delivered_signed_with_the_row_as_latest_serves_it(
    app: Flask, engine: Engine
) -> None:
    vic = key_of(app, "vic", "vip_pro")
    with Receiver() as receiver:
        made = create(app, vic, receiver.url)
        alert, secret = made["alert"], made["secret"]
        runner, dispatcher = runner_of(app, engine)
        try:
            runner.sync()
            for board in boards([55.0, 59.0, 64.0, 66.0]):  # crossed once, at 64
                runner.board(board)
            [call] = receiver.wait(1)
            time.sleep(0.3)
            assert len(receiver.calls) == 1  # the line crossed once
        finally:
            dispatcher.close()
    # Verifiable with the library and the secret shown at creation, as the receiver does.
    headers = {k.lower(): v for k, v in call.headers.items()}
    Webhook(secret).verify(call.body, headers)
    body = json.loads(call.body)
    assert body["type"] == "probboard.alert" and body["alertId"] == alert["id"]
    assert (body["symbol"], body["window"], body["condition"], body["level"], body["side"]) == (
        "BTC", "5m", "p_up_above", 60.0, None
    )  # fmt: skip
    row = body["row"]
    assert row["p_up_pct"] == 64.0 and row["symbol"] == "BTC" and row["isStale"] is False
    # The board's updatedAt as /latest writes it; the expiry (the window's end) in ISO 8601.
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}", body["updatedAt"])
    assert body["expiresAt"] == time.strftime(
        "%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(row["windowEnd"])
    )
    [done] = settled(app, vic, alert["id"], 1)
    assert (done["status"], done["attempts"], done["httpStatus"]) == ("delivered", 1, 200)
    assert done["id"] == headers["webhook-id"] and done["latencyMs"] is not None


def test_a_failing_receiver_is_retried_then_the_alert_is_paused(
    app: Flask, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(delivery, "BACKOFF_S", 0.01)  # the retries' waits, not their number
    vic = key_of(app, "vic", "vip_pro")
    with Receiver(status=500) as receiver:
        made = create(app, vic, receiver.url)
        alert_id = made["alert"]["id"]
        runner, dispatcher = runner_of(app, engine)
        try:
            runner.sync()
            # MAX_FAILURES crossings, each re-armed 2 points below the line.
            values = [50.0] + [61.0, 55.0] * MAX_FAILURES
            for board in boards(values):
                runner.board(board)
                time.sleep(0.02)
            found = settled(app, vic, alert_id, MAX_FAILURES)
            calls = receiver.wait(MAX_FAILURES * delivery.MAX_ATTEMPTS)
        finally:
            dispatcher.close()
    assert len(found) == MAX_FAILURES
    assert all(d["status"] == "failed" and d["httpStatus"] == 500 for d in found), found
    assert all(d["attempts"] == delivery.MAX_ATTEMPTS for d in found), found
    assert len(calls) == MAX_FAILURES * delivery.MAX_ATTEMPTS
    # One webhook-id per delivery, the same on each of its attempts (idempotent by id).
    ids = [c.headers["webhook-id"] for c in calls]
    assert len(set(ids)) == MAX_FAILURES
    shown = app.test_client().get(f"/api/alerts/{alert_id}", headers={"X-API-Key": vic})
    alert = shown.get_json()["alert"]
    assert alert["status"] == "paused"
    assert alert["pausedReason"].startswith(f"{MAX_FAILURES} deliveries failed in a row")


def test_two_alerts_programs_on_one_bus_call_once_per_crossing(app: Flask, engine: Engine) -> None:
    """Every host runs an alerts program (docs/deploy.md): both evaluate the same boards, and
    a crossing is recorded and called once, under one webhook-id, whichever queues it first."""
    vic = key_of(app, "vic", "vip_pro")
    with Receiver() as receiver:
        alert_id = create(app, vic, receiver.url)["alert"]["id"]
        programs = [runner_of(app, engine), runner_of(app, engine)]
        try:
            for runner, _ in programs:
                runner.sync()
            for board in boards([55.0, 64.0, 50.0, 65.0]):  # crossed twice
                for runner, _ in programs:
                    runner.board(board)
            receiver.wait(2)
            time.sleep(0.3)  # a duplicate would have been sent by now
        finally:
            for _, dispatcher in programs:
                dispatcher.close()
    ids = [call.headers["webhook-id"] for call in receiver.calls]
    assert len(ids) == 2 and len(set(ids)) == 2, ids
    found = settled(app, vic, alert_id, 2)
    assert sorted(d["id"] for d in found) == sorted(ids)
    assert all(d["status"] == "delivered" for d in found)


def test_a_paused_or_deleted_alert_stops_firing_and_a_resumed_one_fires_again(
    app: Flask, engine: Engine
) -> None:
    """The runner's reads (``sync``) follow the API: a paused alert and a deleted one are
    no longer evaluated, a resumed one is, from its next crossing."""
    vic = key_of(app, "vic", "vip_pro")
    client, headers = app.test_client(), {"X-API-Key": vic}
    with Receiver() as receiver:
        kept, paused, deleted = (create(app, vic, receiver.url)["alert"]["id"] for _ in range(3))
        runner, dispatcher = runner_of(app, engine)
        try:
            runner.sync()
            assert client.patch(f"/api/alerts/{paused}", json={"status": "paused"},
                                headers=headers).status_code == 200  # fmt: skip
            assert client.delete(f"/api/alerts/{deleted}", headers=headers).status_code == 204
            runner.sync()
            for board in boards([55.0, 64.0]):
                runner.board(board)
            receiver.wait(1)
            time.sleep(0.3)  # a call of the other two would have come by now
            assert [json.loads(c.body)["alertId"] for c in receiver.calls] == [kept]
            assert client.patch(f"/api/alerts/{paused}", json={"status": "active"},
                                headers=headers).status_code == 200  # fmt: skip
            runner.sync()
            for board in boards([55.0, 64.0]):
                runner.board(board)
            receiver.wait(3)
            time.sleep(0.3)
        finally:
            dispatcher.close()
    later = sorted(json.loads(c.body)["alertId"] for c in receiver.calls[1:])
    assert later == sorted([kept, paused])


def test_a_full_read_keeps_each_line_where_it_stands(
    app: Flask, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The runner reads every alert again (``FULL_SYNC_S``, here each read) and builds only
    what changed: a line fired at 64 and back at 59 (inside the re-arm margin) stays
    disarmed through the read, so 61 is no new crossing. Were the read to add the alert
    afresh, it would stand armed at 59 and fire at 61."""
    monkeypatch.setattr(runner_module, "FULL_SYNC_S", 0.0)
    vic = key_of(app, "vic", "vip_pro")
    with Receiver() as receiver:
        made = create(app, vic, receiver.url)["alert"]["id"]
        runner, dispatcher = runner_of(app, engine)
        try:
            runner.sync()
            first, second = boards([55.0, 64.0, 59.0]), boards([61.0])
            for board in first:
                runner.board(board)
            receiver.wait(1)
            runner.sync()
            assert runner.watched == 1
            for board in second:
                runner.board(board)
            time.sleep(0.3)  # a second call would have come by now
        finally:
            dispatcher.close()
    assert [json.loads(c.body)["alertId"] for c in receiver.calls] == [made]


def test_a_read_takes_an_alerts_new_target_and_keeps_its_line(app: Flask, engine: Engine) -> None:
    """A row whose target changed (written to the table: the API changes only the status)
    is rebuilt at the next read: the next crossing calls the new URL, and the line, whose
    rule is the same, stays where it stood (fired at 64, 61 is no new crossing)."""
    vic = key_of(app, "vic", "vip_pro")
    with Receiver() as old, Receiver() as new:
        made = create(app, vic, old.url)["alert"]["id"]
        runner, dispatcher = runner_of(app, engine)
        try:
            runner.sync()
            for board in boards([55.0, 64.0]):
                runner.board(board)
            old.wait(1)
            with engine.begin() as conn:
                conn.execute(
                    update(Alert).where(Alert.id == made).values(url=new.url, updated_at=utcnow())
                )
            runner.sync()
            for board in boards([61.0, 55.0, 64.0]):
                runner.board(board)
            new.wait(1)
            time.sleep(0.3)  # a second call would have come by now
        finally:
            dispatcher.close()
    assert len(old.calls) == 1
    assert [json.loads(c.body)["alertId"] for c in new.calls] == [made]


def test_failures_ending_at_once_on_many_threads_are_all_counted(
    app: Flask, engine: Engine
) -> None:
    """Deliveries of one alert end on several threads (and workers) at once: each failure
    counts. A read-then-write of the count lost some under PostgreSQL's isolation (an alert
    failing again and again stayed active)."""
    import threading

    from sqlalchemy import select

    from app.alert_kinds import AlertSpec
    from app.alerts.calls import Firing
    from app.alerts.models import Alert

    vic = key_of(app, "vic", "vip_pro")
    alert = create(app, vic, "http://127.0.0.1:9/hook")["alert"]
    # No allow-list here: the loopback target is refused at call time, a final failure.
    deliverer = Deliverer(engine, SecretBox(TEST_PEPPER.encode()), AllowList.parse([]))
    spec = AlertSpec(alert["url"], "BTC", "5m", "p_up_above", 60.0, None, "json")
    threads, start = 8, threading.Barrier(8)

    def fail(n: int) -> None:
        firing = Firing(f"msg_race{n}", alert["id"], spec, {}, "", time.time() + 60)
        start.wait(timeout=10)
        deliverer.attempt(firing, 0)

    workers = [threading.Thread(target=fail, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    deliverer.close()
    with engine.connect() as conn:
        failures, status = conn.execute(
            select(Alert.failures, Alert.status).where(Alert.id == alert["id"])
        ).one()
    assert (failures, status) == (threads, "paused")
