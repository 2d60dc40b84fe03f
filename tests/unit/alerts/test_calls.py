"""One call's body, signature and target (``app.alerts.calls``): the JSON body and the chat
ones for every condition, headers a receiver verifies with ``standardwebhooks``, a connection
pinned to the checked address, and a name that now resolves to a private address refused
before any connection (issue 51, points 3 and 4)."""

from __future__ import annotations

import json
import time

import pytest
from standardwebhooks.webhooks import Webhook

from app.alert_kinds import CONDITIONS, FORMATS, AlertSpec
from app.alerts import calls
from app.alerts.calls import Firing, _request_url, body, call, signed_headers
from app.alerts.secrets import SecretBox, SecretUnreadableError, new_secret
from app.alerts.targets import AllowList, resolve

ROW = {"symbol": "BTC", "p_up_pct": 64.0, "up_ask": 0.6, "rem_secs": 120.5, "isStale": False}


def firing(
    condition: str = "p_up_above", fmt: str = "json", url: str = "https://hooks.example/x"
) -> Firing:
    level = None if condition == "stale" else 60.0
    side = "up" if condition == "edge_above" else None
    spec = AlertSpec(url, "BTC", "5m", condition, level, side, fmt)
    return Firing("msg_1", "al_1", spec, ROW, "2026-11-29 20:00:00.000", time.time() + 60)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("condition", CONDITIONS)
def test_every_format_of_every_condition(condition: str, fmt: str) -> None:
    document = json.loads(body(firing(condition, fmt)))
    if fmt == "json":
        assert document["type"] == "probboard.alert" and document["row"] == ROW
        assert document["condition"] == condition and document["alertId"] == "al_1"
    else:
        text = document["text" if fmt == "slack" else "content"]
        assert text.startswith("Probboard BTC 5m: ") and "al_1" in text


def test_the_signature_verifies_with_the_library_and_the_secret() -> None:
    secret = new_secret()
    raw = body(firing())
    headers = signed_headers(secret, "msg_1", raw, time.time())
    assert Webhook(secret).verify(raw, headers) == json.loads(raw)
    with pytest.raises(Exception, match="signature"):
        Webhook(new_secret()).verify(raw, headers)  # another secret's


def test_a_sealed_secret_reads_back_under_its_pepper_only() -> None:
    secret = new_secret()
    sealed = SecretBox(b"pepper-one" * 4).seal(secret)
    assert secret not in sealed
    assert SecretBox(b"pepper-one" * 4).open(sealed) == secret
    with pytest.raises(SecretUnreadableError):
        SecretBox(b"pepper-two" * 4).open(sealed)


def test_the_connection_goes_to_the_checked_address() -> None:
    target = resolve("https://hooks.example:8443/a?b=1", AllowList.parse([]),
                     lambda host, port: ["93.184.216.34"])  # fmt: skip
    url, host, extensions = _request_url(target)
    assert url == "https://93.184.216.34:8443/a?b=1"
    assert host == {"host": "hooks.example:8443"} and extensions == {
        "sni_hostname": "hooks.example"
    }


def test_a_name_now_at_a_private_address_is_refused_without_a_connection() -> None:
    # A real client: the refusal comes before any connection (10.0.0.7 is never dialled).
    with calls.client() as client:
        outcome = call(client, firing(), new_secret(), AllowList.parse([]),
                       lambda host, port: ["10.0.0.7"])  # fmt: skip
    assert not outcome.delivered and not outcome.retry and outcome.latency_ms is None
    assert outcome.error is not None and "not a public address" in outcome.error


def test_an_expired_firing_is_never_called() -> None:
    late = firing()
    late = Firing(late.delivery_id, late.alert_id, late.spec, late.row, late.updated_at, 0.0)
    with calls.client() as client:
        outcome = call(client, late, new_secret(), AllowList.parse([]))
    assert (outcome.delivered, outcome.retry, outcome.error) == (
        False, False, "expired before a call got through"
    )  # fmt: skip


def test_a_job_carries_the_firing_whole_and_a_boards_row_once() -> None:
    """``from_job(as_job(f)) == f`` through RQ's pickling, every field; the firings of one
    board share their row, so a job of 200 pickles it once, not 200 times (a sixth of the
    size here)."""
    import dataclasses
    import pickle

    from app.alerts.queue import as_job, from_job

    # A row as /latest serves it has some 30 fields.
    row = {**ROW, **{f"field_{n}": n / 7 for n in range(30)}}
    fired = [dataclasses.replace(firing("edge_above", "discord"), row=row) for _ in range(200)]
    jobs = [as_job(f) for f in fired]
    assert from_job(pickle.loads(pickle.dumps(jobs[0]))) == fired[0]
    one, all_of_them = len(pickle.dumps(jobs[:1])), len(pickle.dumps(jobs))
    assert all_of_them < 200 * one / 4, (one, all_of_them)  # a copy each: 95 % of 200 * one
