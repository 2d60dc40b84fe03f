"""Keys, sessions and plans on ``/api/keys/verify`` and ``/api/probboard/latest``.

Every body is checked against the contract (or field by field for KeyVerificationResponse,
which has no schema in tests/support yet), and every response is checked for a full key or
session token in its body or headers. Runs on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import math
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from flask import Flask
from sqlalchemy import select, update
from werkzeug.datastructures import Headers
from werkzeug.test import TestResponse

from app.accounts.models import ApiKey, Session
from app.extensions import db
from app.logs import RepeatFilter
from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from harness.processes import wait_until
from tests.conftest import BASE_CONFIG, TEST_PEPPER
from tests.support.contract import validated
from tests.support.logs import captured_log

VERIFY = "/api/keys/verify"
LATEST = "/api/probboard/latest"
SECRET = re.compile(r"pb[ks]_[A-Za-z0-9_-]{43}")
KEY = re.compile(r"^pbk_[A-Za-z0-9_-]{43}$")
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
UNKNOWN_KEY = "pbk_" + "Q" * 43
UNKNOWN_TOKEN = "pbs_" + "Q" * 43
LABELS = {"guest": "Guest", "user": "User", "vip_pro": "VIP Pro", "admin": "Admin"}
REFRESH = {"guest": 5000, "user": 2000, "vip_pro": 500, "admin": 500}

HeaderInput = Mapping[str, str] | Sequence[tuple[str, str]] | None


def keyed_hash(value: str) -> str:
    return hmac.new(TEST_PEPPER.encode(), value.encode(), hashlib.sha256).hexdigest()


def utc_now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def parse_iso(value: str) -> datetime:
    assert ISO_Z.fullmatch(value), value
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ")


class Probe:
    """An app under test: operator commands, requests, and secret bookkeeping."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        # Cookies go in the Cookie header as a browser sends them (no client-side jar).
        self.client = app.test_client(use_cookies=False)
        self.secrets: set[str] = set()
        self.seen: list[str] = []  # every response, as text, for the leak check

    # -- the operator ------------------------------------------------------------------

    def cli(self, *args: str) -> str:
        result = self.app.test_cli_runner().invoke(args=list(args))
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.stdout

    def account(self, name: str, plan: str) -> None:
        self.cli("users", "create", name, "--plan", plan)

    def key(self, name: str, *options: str) -> str:
        key = self.cli("keys", "create", name, *options).splitlines()[-1]
        assert KEY.fullmatch(key), key
        self.secrets.add(key)
        return key

    def session(self, name: str, *options: str) -> str:
        token = self.cli("sessions", "create", name, *options).splitlines()[-1]
        assert SECRET.fullmatch(token), token
        self.secrets.add(token)
        return token

    def forget(self) -> None:
        services_of(self.app).authenticator.directory.forget()

    def change_key(self, key: str, **values: Any) -> None:
        with self.app.app_context():
            db.session.execute(
                update(ApiKey).where(ApiKey.key_hash == keyed_hash(key)).values(**values)
            )
            db.session.commit()

    def change_session(self, token: str, **values: Any) -> None:
        with self.app.app_context():
            db.session.execute(
                update(Session).where(Session.token_hash == keyed_hash(token)).values(**values)
            )
            db.session.commit()

    def stored_last_used(self, key: str) -> datetime | None:
        with self.app.app_context():
            return db.session.scalar(
                select(ApiKey.last_used_at).where(ApiKey.key_hash == keyed_hash(key))
            )

    def publish_board(self) -> None:
        with self.app.app_context():
            bus = services_of(self.app).bus
            assert Refresher(SimulatedSource(parse_symbols("BTC"), seed=1), bus, 500).tick()

    # -- requests ----------------------------------------------------------------------

    def get(
        self, path: str, headers: HeaderInput = None, session: str | None = None
    ) -> TestResponse:
        sent = Headers(list(headers.items()) if isinstance(headers, Mapping) else headers or [])
        if session is not None:
            sent.add("Cookie", f"probboard_session={session}")
        for _, value in sent.items():
            self.secrets.update(SECRET.findall(value))
        response = self.client.get(path, headers=sent)
        self.check_no_secret(response)
        return response

    def check_no_secret(self, response: TestResponse) -> None:
        text = response.get_data(as_text=True)
        head = "\n".join(f"{name}: {value}" for name, value in response.headers.items())
        self.seen.append(head + "\n\n" + text)
        for secret in self.secrets:
            assert secret not in text, (secret, text)
            assert secret not in head, (secret, head)
            assert secret[4:] not in text + head

    def verify(self, key: str, scheme: str = "x-api-key") -> TestResponse:
        if scheme == "x-api-key":
            return self.get(VERIFY, {"X-API-Key": key})
        return self.get(VERIFY, {"Authorization": f"{scheme} {key}"})

    def board(self, headers: HeaderInput = None, session: str | None = None) -> dict[str, Any]:
        response = self.get(LATEST, headers, session)
        assert response.status_code == 200, response.get_data(as_text=True)
        assert response.headers["Cache-Control"] == "no-store"
        return validated("board", response.get_data())


def verified(response: TestResponse, key: str, *, used_before: bool | None) -> dict[str, Any]:
    """A 200 KeyVerificationResponse for ``key``; ``used_before``: must lastUsedAt be set?"""
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert isinstance(body, dict)
    assert set(body) == {"ok", "userId", "plan", "maskedKey", "lastUsedAt"}, body
    assert body["ok"] is True
    assert isinstance(body["userId"], str) and body["userId"]
    assert body["plan"] in ("user", "vip_pro", "admin")
    masked = body["maskedKey"]
    assert isinstance(masked, str)
    assert masked.startswith(key[:12]) and masked.endswith(key[-4:]), masked
    assert key not in masked and len(masked) < len(key)
    # lastUsedAt is the previous successful use: null exactly when there was none. A caller
    # that cannot know (None) still gets the format and the "not in the future" checks.
    last_used = body["lastUsedAt"]
    if used_before is True:
        assert last_used is not None, f"a key used before reports lastUsedAt null: {body}"
    elif used_before is False:
        assert last_used is None, f"a key never used before reports a last use: {body}"
    if last_used is not None:
        assert isinstance(last_used, str), body
        assert parse_iso(last_used) <= utc_now(), body  # a previous use, never a future one
    return body


def refused(response: TestResponse, code: str) -> dict[str, Any]:
    """A 401 ErrorResponse with ``code`` and a bearer challenge."""
    assert response.status_code == 401, response.get_data(as_text=True)
    body = validated("error", response.get_data())
    assert body["code"] == code, body
    assert response.headers["WWW-Authenticate"].startswith("Bearer"), dict(response.headers)
    assert response.headers["Cache-Control"] == "no-store"
    return body


@pytest.fixture
def probe(accounts_app: Flask) -> Probe:
    """The accounts app with a board published, alice (vip_pro) and ursula (user)."""
    probe = Probe(accounts_app)
    probe.publish_board()
    probe.account("alice", "vip_pro")
    probe.account("ursula", "user")
    return probe


@pytest.fixture
def make_app(database_url: str) -> Iterator[Callable[..., Flask]]:
    """Apps of this test's own configuration on the migrated accounts database."""
    made: list[Flask] = []

    def make(monotonic: Callable[[], float] = time.monotonic, **config: str) -> Flask:
        app = create_app(
            {**BASE_CONFIG, "DATABASE_URL": database_url, **config}, monotonic=monotonic
        )
        made.append(app)
        return app

    yield make
    for app in made:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()


# -- valid keys and sessions -------------------------------------------------------------


def test_verify_accepts_both_header_schemes(probe: Probe) -> None:
    key = probe.key("alice")
    for i, scheme in enumerate(("x-api-key", "Bearer", "bearer", "BEARER")):
        body = verified(probe.verify(key, scheme), key, used_before=i > 0)
        assert (body["userId"], body["plan"]) == ("alice", "vip_pro"), scheme
        assert body["maskedKey"] == f"{key[:12]}...{key[-4:]}"
    # The same key in both headers is no conflict; surrounding blanks are not part of it.
    both = probe.get(VERIFY, {"X-API-Key": f" {key} ", "Authorization": f"Bearer  {key} "})
    assert verified(both, key, used_before=True)["userId"] == "alice"
    assert probe.get(VERIFY, {"X-API-Key": key}).headers["Cache-Control"] == "no-store"


@pytest.mark.parametrize("scheme", ["x-api-key", "Bearer", "bearer"])
def test_latest_with_a_vip_pro_key(probe: Probe, scheme: str) -> None:
    key = probe.key("alice")
    headers = {"X-API-Key": key} if scheme == "x-api-key" else {"Authorization": f"{scheme} {key}"}
    board = probe.board(headers)
    assert (board["plan"], board["planLabel"], board["refreshMs"]) == ("vip_pro", "VIP Pro", 500)
    assert board["items"], board


def test_latest_with_an_admin_key(probe: Probe) -> None:
    probe.account("root", "admin")
    key = probe.key("root")
    assert verified(probe.verify(key, "Bearer"), key, used_before=False)["plan"] == "admin"
    board = probe.board({"Authorization": f"Bearer {key}"})
    assert (board["plan"], board["planLabel"], board["refreshMs"]) == ("admin", "Admin", 500)
    assert board["items"]


def test_latest_without_credentials_is_the_guest_plan(probe: Probe) -> None:
    board = probe.board()
    assert (board["plan"], board["planLabel"], board["refreshMs"]) == ("guest", "Guest", 5000)
    assert board["items"]


@pytest.mark.parametrize("plan", ["user", "vip_pro", "admin"])
def test_session_cookie_selects_its_owners_plan(probe: Probe, plan: str) -> None:
    probe.account("sam", plan)
    token = probe.session("sam")
    board = probe.board(session=token)
    assert (board["plan"], board["planLabel"], board["refreshMs"]) == (
        plan,
        LABELS[plan],
        REFRESH[plan],
    )
    assert board["items"]


def test_user_session_cookie_gets_the_user_plan(probe: Probe) -> None:
    board = probe.board(session=probe.session("ursula"))
    assert (board["plan"], board["planLabel"], board["refreshMs"]) == ("user", "User", 2000)


def test_a_session_cookie_is_not_an_api_key(probe: Probe) -> None:
    token = probe.session("ursula")
    refused(probe.get(VERIFY, session=token), "missing_credentials")
    refused(probe.get(VERIFY, {"X-API-Key": token}), "invalid_key")


def test_a_key_wins_over_a_session(probe: Probe) -> None:
    key = probe.key("alice")
    token = probe.session("ursula")
    board = probe.board({"X-API-Key": key}, session=token)
    assert (board["plan"], board["refreshMs"]) == ("vip_pro", 500)
    # A wrong key is not rescued by a good session: the caller must learn the key is wrong.
    refused(probe.get(LATEST, {"X-API-Key": UNKNOWN_KEY}, session=token), "invalid_key")
    # ... and the session still works on its own.
    assert probe.board(session=token)["plan"] == "user"


# -- every 401 ---------------------------------------------------------------------------


def test_verify_without_a_key_is_missing_credentials(probe: Probe) -> None:
    body = refused(probe.get(VERIFY), "missing_credentials")
    assert "X-API-Key" in body["error"] and "Bearer" in body["error"]
    refused(probe.get(VERIFY, {"Cookie": "probboard_session=x"}), "missing_credentials")
    # /latest without a key is simply the guest board.
    assert probe.board()["plan"] == "guest"


HEADER_PROBLEMS = [
    pytest.param([("Authorization", "Basic x")], "malformed_authorization", id="basic"),
    pytest.param([("Authorization", "Bearer")], "malformed_authorization", id="bearer-alone"),
    pytest.param([("Authorization", "Bearer ")], "malformed_authorization", id="bearer-blank"),
    pytest.param([("Authorization", "Bearer a b")], "malformed_authorization", id="bearer-a-b"),
    pytest.param([("Authorization", "{key}")], "malformed_authorization", id="no-scheme"),
    pytest.param(
        [("Authorization", "Bearer {key}"), ("Authorization", "Bearer {key}")],
        "malformed_authorization",
        id="two-authorization",
    ),
    pytest.param(
        [("X-API-Key", "{key}"), ("Authorization", f"Bearer {UNKNOWN_KEY}")],
        "conflicting_credentials",
        id="different-keys",
    ),
]


@pytest.mark.parametrize("path", [VERIFY, LATEST])
@pytest.mark.parametrize(("headers", "code"), HEADER_PROBLEMS)
def test_header_problems_are_401_with_their_own_code(
    probe: Probe, path: str, headers: list[tuple[str, str]], code: str
) -> None:
    key = probe.key("alice")  # a valid key: the header problem alone is refused
    sent = [(name, value.format(key=key)) for name, value in headers]
    body = refused(probe.get(path, sent, session=probe.session("ursula")), code)
    assert body["code"] != "invalid_key"
    # The refused request was no use of the key: this verification is its first.
    assert verified(probe.verify(key), key, used_before=False)["plan"] == "vip_pro"


@pytest.mark.parametrize("path", [VERIFY, LATEST])
def test_two_x_api_key_headers_are_refused(probe: Probe, path: str) -> None:
    """Repeated headers arrive joined by commas: two keys conflict, one key twice is fine."""
    key = probe.key("alice")
    response = probe.get(path, [("X-API-Key", key), ("X-API-Key", UNKNOWN_KEY)])
    assert response.status_code == 401, response.get_data(as_text=True)
    body = validated("error", response.get_data())
    assert body["code"] == "conflicting_credentials", body
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    repeated = probe.get(path, [("X-API-Key", key), ("X-API-Key", key)])
    assert repeated.status_code == 200, repeated.get_data(as_text=True)


@pytest.mark.parametrize("path", [VERIFY, LATEST])
def test_every_invalid_key_gets_the_same_answer(probe: Probe, path: str) -> None:
    probe.account("dora", "vip_pro")
    revoked = probe.key("alice")
    expired = probe.key("alice", "--expires-in-days", "1")
    disabled_owner = probe.key("dora")
    for key in (revoked, expired, disabled_owner):
        assert verified(probe.verify(key), key, used_before=False)  # each works before

    probe.cli("keys", "revoke", revoked)
    probe.change_key(expired, expires_at=utc_now() - timedelta(seconds=1))
    probe.cli("users", "disable", "dora")
    probe.forget()

    presented = {
        "unknown": UNKNOWN_KEY,
        "garbage": "hello",
        "almost-a-key": revoked[:-1],
        "session-token": probe.session("ursula"),
        "revoked": revoked,
        "expired": expired,
        "disabled-owner": disabled_owner,
    }
    answers = {}
    for what, key in presented.items():
        response = probe.get(path, {"X-API-Key": key})
        body = refused(response, "invalid_key")
        headers = {
            k: v
            for k, v in response.headers.items()
            if k != "X-Request-ID" and not k.startswith("X-RateLimit-")
        }
        answers[what] = (body, headers)
    first_body, first_headers = answers["unknown"]
    for what, (body, headers) in answers.items():
        assert body == first_body, what
        assert headers == first_headers, what
    message = first_body["error"].lower()
    for word in ("revoked", "expired", "disabled", "unknown", "exist", "found"):
        assert word not in message, message
    # The same through the other scheme.
    assert refused(probe.verify(expired, "Bearer"), "invalid_key") == first_body


def test_an_expired_key_stops_working(probe: Probe) -> None:
    key = probe.key("alice", "--expires-in-days", "1")
    assert verified(probe.verify(key), key, used_before=False)["plan"] == "vip_pro"
    assert probe.board({"X-API-Key": key})["plan"] == "vip_pro"
    probe.change_key(key, expires_at=utc_now() - timedelta(minutes=5))
    probe.forget()
    refused(probe.verify(key), "invalid_key")
    refused(probe.get(LATEST, {"Authorization": f"Bearer {key}"}), "invalid_key")


def test_disabled_owner_then_enabled_again(probe: Probe) -> None:
    key = probe.key("alice")
    token = probe.session("alice")
    probe.cli("users", "disable", "alice")
    probe.forget()
    refused(probe.verify(key), "invalid_key")
    assert probe.board(session=token)["plan"] == "guest"
    probe.cli("users", "enable", "alice")
    probe.forget()
    # The refused attempt while disabled was no use: the key has still never been used.
    assert verified(probe.verify(key), key, used_before=False)["plan"] == "vip_pro"
    assert probe.board(session=token)["plan"] == "vip_pro"


@pytest.mark.parametrize("state", ["unknown", "garbage", "revoked", "expired", "disabled"])
def test_a_bad_session_cookie_is_the_guest_board(probe: Probe, state: str) -> None:
    token = probe.session("ursula")
    assert probe.board(session=token)["plan"] == "user"
    if state == "unknown":
        token = UNKNOWN_TOKEN
    elif state == "garbage":
        token = "not a token at all"
    elif state == "revoked":
        probe.cli("sessions", "revoke", token)
    elif state == "expired":
        probe.change_session(token, expires_at=utc_now() - timedelta(seconds=1))
    else:
        probe.cli("users", "disable", "ursula")
    probe.forget()
    board = probe.board(session=token)
    assert (board["plan"], board["refreshMs"]) == ("guest", 5000)
    assert board["items"]


# -- changes reach a running app ---------------------------------------------------------


class CacheClock:
    """The monotonic clock the app's credential cache ages on, moved by the test."""

    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def timed_probe(make_app: Callable[..., Flask]) -> tuple[Probe, CacheClock]:
    """``probe``'s app and accounts, its credential cache on a clock the test drives."""
    clock = CacheClock()
    probe = Probe(make_app(monotonic=clock))
    probe.publish_board()
    probe.account("alice", "vip_pro")
    probe.account("ursula", "user")
    return probe, clock


def test_revocation_takes_effect_within_5_seconds_without_forget(
    timed_probe: tuple[Probe, CacheClock],
) -> None:
    probe, clock = timed_probe
    key = probe.key("alice")
    assert verified(probe.verify(key), key, used_before=False)  # cached now
    assert probe.board({"X-API-Key": key})["plan"] == "vip_pro"
    probe.cli("keys", "revoke", key)
    # 5 s on the cache's clock: AUTH_CACHE_MS may be at most 5 s, whatever the default.
    clock.t += 5.0
    refused(probe.verify(key), "invalid_key")
    refused(probe.get(LATEST, {"X-API-Key": key}), "invalid_key")


def test_downgrade_takes_effect_within_5_seconds_without_forget(
    timed_probe: tuple[Probe, CacheClock],
) -> None:
    probe, clock = timed_probe
    key = probe.key("alice")
    assert verified(probe.verify(key), key, used_before=False)["plan"] == "vip_pro"
    probe.cli("users", "set-plan", "alice", "user")
    clock.t += 5.0  # as above: the longest AUTH_CACHE_MS allowed
    assert verified(probe.verify(key), key, used_before=True)["plan"] == "user"
    board = probe.board({"X-API-Key": key})
    assert (board["plan"], board["planLabel"], board["refreshMs"]) == ("user", "User", 2000)


def test_downgrade_and_upgrade_with_forget(probe: Probe) -> None:
    key = probe.key("alice")
    token = probe.session("alice")
    assert probe.board({"X-API-Key": key})["refreshMs"] == 500
    probe.cli("users", "set-plan", "alice", "user")
    probe.forget()
    body = verified(probe.verify(key, "Bearer"), key, used_before=True)
    assert (body["userId"], body["plan"]) == ("alice", "user")
    for board in (probe.board({"X-API-Key": key}), probe.board(session=token)):
        assert (board["plan"], board["refreshMs"]) == ("user", 2000)
    probe.cli("users", "set-plan", "alice", "admin")
    probe.forget()
    assert verified(probe.verify(key), key, used_before=True)["plan"] == "admin"
    assert probe.board({"X-API-Key": key})["refreshMs"] == 500


def test_revocation_with_forget_is_immediate(probe: Probe) -> None:
    kept = probe.key("alice")
    gone = probe.key("alice")
    assert verified(probe.verify(gone), gone, used_before=False)
    probe.cli("keys", "revoke", gone)
    probe.forget()
    refused(probe.verify(gone), "invalid_key")
    assert verified(probe.verify(kept), kept, used_before=False)["plan"] == "vip_pro"


# -- lastUsedAt --------------------------------------------------------------------------


def test_last_used_at_reports_the_previous_use(probe: Probe) -> None:
    key = probe.key("alice")
    before = utc_now()
    first = verified(probe.verify(key), key, used_before=False)
    after = utc_now()
    assert first["lastUsedAt"] is None
    second = verified(probe.verify(key, "Bearer"), key, used_before=True)
    assert second["lastUsedAt"] is not None
    used = parse_iso(second["lastUsedAt"])
    assert before - timedelta(milliseconds=1) <= used <= after, (before, used, after)
    # A board read with the key is a use too.
    before = utc_now()
    probe.board({"X-API-Key": key})
    after = utc_now()
    third = parse_iso(verified(probe.verify(key), key, used_before=True)["lastUsedAt"])
    assert before - timedelta(milliseconds=1) <= third <= after
    # Uses are coalesced: nothing is written within LAST_USED_FLUSH_S (default 10 s).
    assert probe.stored_last_used(key) is None


def test_last_used_at_is_written_after_the_flush_interval(
    make_app: Callable[..., Flask],
) -> None:
    probe = Probe(make_app(LAST_USED_FLUSH_S="1"))
    probe.account("alice", "vip_pro")
    key = probe.key("alice")
    other = probe.key("alice")
    start = utc_now()
    verified(probe.verify(key), key, used_before=False)
    assert wait_until(
        lambda: (
            verified(probe.verify(key), key, used_before=True)
            and probe.stored_last_used(key) is not None
        ),
        timeout=5.0,
        interval=0.2,
    )
    stored = probe.stored_last_used(key)
    assert stored is not None and start <= stored <= utc_now()
    assert probe.stored_last_used(other) is None  # never used, never written


def test_last_used_at_survives_a_flush(make_app: Callable[..., Flask]) -> None:
    """Right after this worker wrote its pending uses, verify still reports the previous use."""
    probe = Probe(make_app(LAST_USED_FLUSH_S="1", AUTH_CACHE_MS="5000"))
    probe.account("alice", "vip_pro")
    key = probe.key("alice")
    first_at = utc_now()
    assert verified(probe.verify(key), key, used_before=False)["lastUsedAt"] is None
    time.sleep(1.1)  # past LAST_USED_FLUSH_S: the next use writes the batch
    second_at = utc_now()
    second = verified(probe.verify(key), key, used_before=True)
    after_second = utc_now()
    # That use starts the write of the batch, in the background (never in the request).
    assert wait_until(lambda: probe.stored_last_used(key) is not None, timeout=5.0, interval=0.05)
    stored = probe.stored_last_used(key)
    assert stored is not None and second_at <= stored <= after_second  # written by that use
    third = verified(probe.verify(key), key, used_before=True)

    assert second["lastUsedAt"] is not None
    assert first_at - timedelta(milliseconds=1) <= parse_iso(second["lastUsedAt"]) <= second_at
    assert third["lastUsedAt"] is not None, "the use written by the flush is reported as never"
    assert (
        second_at - timedelta(milliseconds=1) <= parse_iso(third["lastUsedAt"]) <= after_second
    ), third


# -- throttling failed attempts ----------------------------------------------------------


def test_failed_key_attempts_are_throttled(make_app: Callable[..., Flask]) -> None:
    """Failed attempts block an address for the rest of the limit's window, good keys too."""
    # The limit's windows follow the clock's hours (a sliding-window counter): failures in
    # an hour's last seconds would rightly be released within a second of the boundary. An
    # hour's window, not a minute's, so that this wait is met in one run in 240, not in four.
    second = time.time() % 3600
    if second > 3600 - 15:
        time.sleep(3600.5 - second)
    probe = Probe(make_app(AUTH_FAILURE_LIMIT="5 per hour"))
    probe.publish_board()
    probe.account("alice", "vip_pro")
    probe.account("ursula", "user")
    key = probe.key("alice")
    token = probe.session("ursula")
    # Successful uses do not count.
    for i in range(8):
        verified(probe.verify(key), key, used_before=i > 0)
    failures = [
        (VERIFY, {"X-API-Key": UNKNOWN_KEY}, "invalid_key"),
        (LATEST, {"X-API-Key": "pbk_guess"}, "invalid_key"),
        (VERIFY, {"Authorization": f"Bearer {UNKNOWN_KEY[:-1]}x"}, "invalid_key"),
        (LATEST, {"Authorization": "Basic x"}, "malformed_authorization"),
        (VERIFY, {"X-API-Key": key, "Authorization": f"Bearer {UNKNOWN_KEY}"},
         "conflicting_credentials"),
    ]  # fmt: skip
    for path, headers, code in failures:
        refused(probe.get(path, headers), code)

    for path, headers in [
        (VERIFY, {"X-API-Key": UNKNOWN_KEY}),
        (VERIFY, {"X-API-Key": key}),  # even a good key, from this client, for now
        (LATEST, {"Authorization": f"Bearer {key}"}),
        # A forged X-Forwarded-For does not make the same client someone new.
        (VERIFY, {"X-API-Key": UNKNOWN_KEY, "X-Forwarded-For": "203.0.113.7"}),
    ]:
        response = probe.get(path, headers)
        assert response.status_code == 429, (path, response.get_data(as_text=True))
        body = validated("error", response.get_data())
        assert body["code"] == "rate_limited"
        retry_ms = body["retryAfterMs"]
        assert isinstance(retry_ms, int) and not isinstance(retry_ms, bool)
        # The window is an hour and the failures just happened.
        assert 1000 < retry_ms <= 3_600_000, retry_ms
        assert response.headers["Retry-After"] == str(math.ceil(retry_ms / 1000))
        assert int(response.headers["Retry-After"]) >= 1

    # Without a key nothing is throttled: guests and sessions are served.
    assert probe.board()["plan"] == "guest"
    assert probe.board(session=token)["plan"] == "user"
    refused(probe.get(VERIFY), "missing_credentials")


# -- nothing leaks -----------------------------------------------------------------------


@pytest.fixture
def fresh_repeat_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    """New RepeatFilters for this test: lines an earlier test logged do not hold back its own."""
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            fresh = [RepeatFilter() if isinstance(f, RepeatFilter) else f for f in logger.filters]
            monkeypatch.setattr(logger, "filters", fresh)


@pytest.mark.usefixtures("fresh_repeat_filters")
def test_no_response_or_log_line_carries_a_key_or_token(
    make_app: Callable[..., Flask], caplog: pytest.LogCaptureFixture
) -> None:
    probe = Probe(make_app(AUTH_FAILURE_LIMIT="12 per minute", LOG_LEVEL="DEBUG"))
    probe.publish_board()
    probe.account("alice", "vip_pro")
    probe.account("ursula", "user")
    key = probe.key("alice")
    revoked = probe.key("alice")
    token = probe.session("ursula")
    probe.cli("keys", "revoke", revoked)
    caplog.set_level(logging.DEBUG)
    with captured_log() as buffer:
        verified(probe.verify(key), key, used_before=False)
        verified(probe.verify(key, "Bearer"), key, used_before=True)
        probe.board({"X-API-Key": key}, session=token)
        probe.board(session=token)
        refused(probe.verify(revoked), "invalid_key")
        refused(probe.get(LATEST, {"Authorization": f"Bearer {revoked}"}), "invalid_key")
        refused(probe.get(VERIFY, {"X-API-Key": key, "Authorization": f"Bearer {revoked}"}),
                "conflicting_credentials")  # fmt: skip
        refused(probe.get(VERIFY, {"Authorization": f"Token {key}"}), "malformed_authorization")
        refused(probe.get(VERIFY, [("Authorization", f"Bearer {key}")] * 2),
                "malformed_authorization")  # fmt: skip
        refused(probe.get(VERIFY, {"X-API-Key": token}), "invalid_key")
        for _ in range(10):
            probe.get(VERIFY, {"X-API-Key": UNKNOWN_KEY})
        throttled = probe.get(VERIFY, {"X-API-Key": key})
        assert throttled.status_code == 429
        probe.cli("keys", "list")
        probe.cli("sessions", "revoke", token)
        probe.board(session=token)

    stderr_text = buffer.getvalue()
    assert "exceeded" in stderr_text  # the capture works: the throttle logged its line
    records = caplog.records
    assert records
    texts = [stderr_text, caplog.text] + [r.getMessage() for r in records]
    texts += [str(r.args) for r in records if r.args]
    for secret in (key, revoked, token, UNKNOWN_KEY):
        for text in texts:
            assert secret not in text, (secret, text)
            assert secret[4:] not in text, (secret, text)
    assert len(probe.seen) >= 20


# -- the store is away -------------------------------------------------------------------


def test_an_unreachable_store_is_503_not_401() -> None:
    """A key that cannot be checked is not called invalid; guests are still served."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": "postgresql://postgres@127.0.0.1:1/none"})
    try:
        probe = Probe(app)
        probe.publish_board()
        for path, headers, session in [
            (VERIFY, {"X-API-Key": UNKNOWN_KEY}, None),
            (LATEST, {"Authorization": f"Bearer {UNKNOWN_KEY}"}, None),
            (LATEST, {}, UNKNOWN_TOKEN),
        ]:
            response = probe.get(path, headers, session)
            assert response.status_code == 503, response.get_data(as_text=True)
            body = validated("error", response.get_data())
            assert body["code"] == "auth_unavailable"
            assert isinstance(body["retryAfterMs"], int)
            assert response.headers["Retry-After"] == str(math.ceil(body["retryAfterMs"] / 1000))
        assert probe.board()["plan"] == "guest"
        refused(probe.get(VERIFY), "missing_credentials")
    finally:
        with app.app_context():
            db.session.remove()
            db.engine.dispose()
