"""Receivers that misbehave (issue 51, point 5): a call never waits past its timeouts, is
retried while it may help and its moment lasts, follows no redirect, and says what happened
in words of ours; the process goes on delivering. The runner and the calls in process, a
real receiver on loopback, the accounts on SQLite then PostgreSQL.

The timeouts are shortened (0.5 s) so that six attempts fit a test: the subject is what is
done when they run out, not their length.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from flask import Flask
from sqlalchemy.engine import Engine

from app.alerts import calls, delivery
from harness.receiver import Receiver
from tests.integration.alerts.test_delivery import boards, create, runner_of, settled
from tests.unit.test_cors import key_of


@pytest.fixture(autouse=True)
def short_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "BACKOFF_S", 0.01)
    monkeypatch.setattr(calls, "TOTAL_TIMEOUT_S", 0.5)
    monkeypatch.setattr(calls, "CONNECT_TIMEOUT_S", 0.5)


def fire_once(app: Flask, engine: Engine, receiver: Receiver) -> tuple[str, dict[str, Any]]:
    """One alert on ``receiver``, one crossing; its one delivery once it has ended."""
    vic = key_of(app, "vic", "vip_pro")
    alert_id = create(app, vic, receiver.url)["alert"]["id"]
    runner, dispatcher = runner_of(app, engine)
    try:
        runner.sync()
        started = time.monotonic()
        for board in boards([55.0, 64.0]):
            runner.board(board)
        [done] = settled(app, vic, alert_id, 1)
        elapsed = time.monotonic() - started
    finally:
        dispatcher.close()
    # Six attempts of at most 0.5 s each and their short waits: never the receiver's pace.
    assert elapsed < 10, elapsed
    return alert_id, done


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("hangs for a minute", "timed out"),
        ("closes the socket", "connection failed (RemoteProtocolError)"),
    ],
)
def test_a_receiver_that_never_answers_is_tried_six_times_then_given_up(
    app: Flask, engine: Engine, fault: str, error: str
) -> None:
    with Receiver() as receiver:
        if fault == "hangs for a minute":
            receiver.hang_s = 60.0
        else:
            receiver.close = True
        _, done = fire_once(app, engine, receiver)
        assert len(receiver.wait(delivery.MAX_ATTEMPTS, 5)) == delivery.MAX_ATTEMPTS
    assert (done["status"], done["attempts"], done["error"]) == (
        "failed", delivery.MAX_ATTEMPTS, error
    )  # fmt: skip


def test_a_redirect_to_a_private_address_is_never_followed(app: Flask, engine: Engine) -> None:
    with Receiver() as receiver, Receiver() as private:
        # The receiver is allowed (127.0.0.1); it redirects to 10.0.0.1, and to another
        # loopback receiver: neither is called, and the call is not retried.
        receiver.redirect_to = "http://10.0.0.1/steal"
        _, done = fire_once(app, engine, receiver)
        receiver.redirect_to = private.url
        assert private.calls == []
    assert (done["status"], done["attempts"], done["httpStatus"]) == ("failed", 1, 307)
    assert done["error"] == "answered a redirect (never followed)"
