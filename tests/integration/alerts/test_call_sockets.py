"""One call over real sockets (issue 51, point 4): over https it goes to the address that was
checked and is still verified against the URL's host (a real TLS receiver on loopback, a name
that "resolves" to it, the client's certificates those of the test); an answer dripped a byte
at a time ends at the call's total bound."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from app.alert_kinds import AlertSpec
from app.alerts import calls
from app.alerts.calls import Firing, call
from app.alerts.targets import AllowList
from harness.certs import self_signed, server_context, trusting
from harness.receiver import Receiver

ALLOWED = AllowList.parse(["127.0.0.1"])


def _firing(url: str) -> Firing:
    spec = AlertSpec(url, "BTC", "5m", "p_up_above", 60.0, None, "json")
    return Firing("msg_tls", "al_tls", spec, {"symbol": "BTC"}, "2026-11-30 00:00:00.000",
                  time.time() + 60)  # fmt: skip


def _at_loopback(host: str, port: int) -> list[str]:
    return ["127.0.0.1"]  # hooks.test, as a resolver would give it (checked, then dialled)


def test_the_certificate_is_checked_against_the_urls_host_at_the_checked_address(
    tmp_path: Path,
) -> None:
    hooks, hooks_key = self_signed(tmp_path, "hooks.test")
    other, other_key = self_signed(tmp_path, "other.test")
    trusted = trusting(hooks, other)
    with Receiver(tls=server_context(hooks, hooks_key)) as receiver:
        url = f"https://hooks.test:{receiver.port}/hook?token=t"
        with calls.client(trusted) as pool:
            outcome = call(pool, _firing(url), "whsec_" + "A" * 32, ALLOWED, _at_loopback)
        assert outcome.delivered, outcome
        [got] = receiver.calls
        assert got.headers["host"] == f"hooks.test:{receiver.port}"
        assert got.path == "/hook?token=t"
        assert receiver.server_names == ["hooks.test"]  # the URL's host as the TLS name
        # The same address and port, a certificate of another name: refused, never sent.
    with Receiver(tls=server_context(other, other_key)) as impostor:
        url = f"https://hooks.test:{impostor.port}/hook"
        with calls.client(trusted) as pool:
            outcome = call(pool, _firing(url), "whsec_" + "A" * 32, ALLOWED, _at_loopback)
        assert not outcome.delivered and outcome.retry, outcome
        assert outcome.error == "connection failed (ConnectError)", outcome.error
        assert impostor.calls == []
    # And a certificate nobody trusts (the system's store here): refused as well.
    with Receiver(tls=server_context(hooks, hooks_key)) as receiver:
        url = f"https://hooks.test:{receiver.port}/hook"
        with calls.client() as pool:
            outcome = call(pool, _firing(url), "whsec_" + "A" * 32, ALLOWED, _at_loopback)
        assert not outcome.delivered and receiver.calls == [], outcome


def test_an_answer_dripped_a_byte_at_a_time_ends_at_the_total_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each byte comes well within the read timeout, so only a bound on the whole call ends
    it: the status line and headers take 38 x 0.2 s, the bound here is 1 s (before the bound
    covered them, the call ended only at the body, 7.6 s in)."""
    monkeypatch.setattr(calls, "TOTAL_TIMEOUT_S", 1.0)
    with Receiver() as receiver:
        receiver.drip_s = 0.2
        with calls.client() as pool:
            outcome = call(pool, _firing(receiver.url), "whsec_" + "A" * 32, ALLOWED)
    assert (outcome.delivered, outcome.retry, outcome.error) == (False, True, "timed out")
    assert outcome.latency_ms is not None and outcome.latency_ms < 4000, outcome  # not 7.6 s
