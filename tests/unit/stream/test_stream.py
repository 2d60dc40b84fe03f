"""``GET /api/probboard/stream`` in process: access rules, the per-key limit, the first bytes.

The Flask test client runs the view without gunicorn, so the stream takes its generator
path (no direct socket writes); a streamed response is read a few chunks at a time and then
closed, which is the client going away. Boards are published on the memory bus by a
``Refresher`` tick. Runs on SQLite and on PostgreSQL. The same behaviour under real gunicorn
workers and Redis is in ``test_stream_gunicorn.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from flask import Flask
from werkzeug.test import TestResponse

from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app
from harness.stream_client import STREAM, Event, Retry, SseParser, naive_boards
from tests.conftest import BASE_CONFIG
from tests.support.contract import validated

UNKNOWN_KEY = "pbk_" + "Q" * 43


class Probe:
    """An app under test: operator commands, boards, and streamed requests."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.client = app.test_client(use_cookies=False)
        self.refresher = Refresher(
            SimulatedSource(parse_symbols("BTC"), seed=1), services_of(app).bus, 500
        )
        self.open: list[TestResponse] = []

    def cli(self, *args: str) -> str:
        result = self.app.test_cli_runner().invoke(args=list(args))
        assert result.exit_code == 0, (args, result.output, result.exception)
        return result.stdout

    def key_for(self, name: str, plan: str) -> str:
        """A new account ``name`` with ``plan`` (made vip_pro first if keys need it) and a key."""
        self.cli("users", "create", name, "--plan", "admin" if plan == "admin" else "vip_pro")
        key = self.cli("keys", "create", name).splitlines()[-1]
        if plan not in ("admin", "vip_pro"):
            self.cli("users", "set-plan", name, plan)
        return key

    def publish(self) -> int:
        """Publish a new board; its sequence number (the event id)."""
        with self.app.app_context():
            assert self.refresher.tick()
        return self.refresher._last_seq

    def stream(self, headers: Mapping[str, str] | None = None) -> TestResponse:
        response = self.client.get(STREAM, headers=dict(headers or {}), buffered=False)
        self.open.append(response)
        return response

    def close_all(self) -> None:
        for response in self.open:
            response.close()
        self.open.clear()
        services_of(self.app).broker.shutdown()  # ends the broker's ticker thread


@pytest.fixture
def probe(accounts_app: Flask) -> Iterator[Probe]:
    handle = Probe(accounts_app)
    yield handle
    handle.close_all()


@pytest.fixture
def limited(database_url: str) -> Iterator[Probe]:
    """An app whose keys may hold two streams at once."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, "STREAM_MAX_PER_KEY": "2"})
    handle = Probe(app)
    yield handle
    handle.close_all()
    with app.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


def error_of(response: TestResponse, status: int, code: str) -> dict[str, Any]:
    """Check an ErrorResponse answer (never a stream) and return its body."""
    assert response.status_code == status, (response.status_code, response.get_data())
    assert response.mimetype == "application/json"
    body = validated("error", response.get_data())
    assert body["code"] == code, body
    assert body["ok"] is False
    return body


def chunks(response: TestResponse) -> Iterator[bytes]:
    """The chunks of a streamed response, as the app yields them."""
    for chunk in response.response:
        assert isinstance(chunk, bytes)
        yield chunk


def first_chunks(response: TestResponse, count: int) -> bytes:
    """The first ``count`` chunks the stream's iterator yields."""
    assert response.status_code == 200, response.get_data()
    iterator = chunks(response)
    return b"".join(next(iterator) for _ in range(count))


def parse(body: bytes) -> list[Any]:
    return SseParser().feed(body)


def board_events(body: bytes, plan: str) -> list[tuple[int, dict[str, Any]]]:
    """Boards of ``body`` by the spec's rules, checked against the naive line splitter."""
    events = [item for item in parse(body) if isinstance(item, Event)]
    assert all(e.type == "board" for e in events), events
    boards = [(int(e.id), validated("board", e.data)) for e in events]
    naive = naive_boards(body)
    assert [(int(i or 0), b) for i, b in naive] == boards
    for _, board in boards:
        assert board["plan"] == plan
    return boards


# -- access ---------------------------------------------------------------------------------


def test_no_key_is_401_missing_credentials(probe: Probe) -> None:
    probe.publish()
    response = probe.stream()
    error_of(response, 401, "missing_credentials")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    "headers",
    [{"X-API-Key": UNKNOWN_KEY}, {"Authorization": f"Bearer {UNKNOWN_KEY}"}],
    ids=["x-api-key", "bearer"],
)
def test_invalid_key_is_401_invalid_key(probe: Probe, headers: dict[str, str]) -> None:
    probe.publish()
    error_of(probe.stream(headers), 401, "invalid_key")


def test_user_plan_key_is_403_vip_pro_required(probe: Probe) -> None:
    key = probe.key_for("ursula", "user")
    probe.publish()
    error_of(probe.stream({"X-API-Key": key}), 403, "vip_pro_required")
    error_of(probe.stream({"Authorization": f"Bearer {key}"}), 403, "vip_pro_required")


def test_session_cookie_alone_opens_no_stream(probe: Probe) -> None:
    probe.cli("users", "create", "vera", "--plan", "vip_pro")
    token = probe.cli("sessions", "create", "vera").splitlines()[-1]
    probe.publish()
    response = probe.stream({"Cookie": f"probboard_session={token}"})
    error_of(response, 401, "missing_credentials")


def test_disabled_owner_key_is_401(probe: Probe) -> None:
    key = probe.key_for("dora", "vip_pro")
    probe.cli("users", "disable", "dora")
    probe.publish()
    error_of(probe.stream({"X-API-Key": key}), 401, "invalid_key")


def test_admin_key_streams_under_the_admin_plan(probe: Probe) -> None:
    key = probe.key_for("root", "admin")
    seq = probe.publish()
    response = probe.stream({"Authorization": f"Bearer {key}"})
    body = first_chunks(response, 1)
    assert response.mimetype == "text/event-stream"
    assert board_events(body, "admin") == [(seq, board_events(body, "admin")[0][1])]


# -- the first bytes and the following boards -----------------------------------------------


def test_vip_pro_stream_opens_with_retry_then_the_current_board_then_new_ones(
    probe: Probe,
) -> None:
    key = probe.key_for("vic", "vip_pro")
    first_seq = probe.publish()
    response = probe.stream({"X-API-Key": key})
    assert response.status_code == 200
    assert response.mimetype == "text/event-stream"
    assert response.headers["X-Accel-Buffering"] == "no"
    assert "Content-Encoding" not in response.headers
    iterator = chunks(response)
    body = next(iterator)
    items = parse(body)
    assert isinstance(items[0], Retry), items
    assert 1500 <= items[0].ms <= 2500
    assert body.startswith(f"retry: {items[0].ms}\n".encode())
    assert board_events(body, "vip_pro")[0][0] == first_seq  # at once, no new board needed
    seqs = [first_seq]
    for _ in range(3):
        seqs.append(probe.publish())
        body += next(iterator)
    boards = board_events(body, "vip_pro")
    assert [seq for seq, _ in boards] == seqs
    updated = [b["updatedAt"] for _, b in boards]
    assert updated == sorted(updated)
    # One data line per board: each event is exactly id, event, data.
    for block in body.decode().split("\n\n")[1:]:
        if block:
            lines = block.split("\n")
            assert [line.split(":", 1)[0] for line in lines] == ["id", "event", "data"], block
            json.loads(lines[2][len("data:") :])


def test_last_event_id_of_the_current_board_skips_the_duplicate(probe: Probe) -> None:
    key = probe.key_for("vic", "vip_pro")
    older = probe.publish()
    current = probe.publish()
    response = probe.stream({"X-API-Key": key, "Last-Event-ID": str(current)})
    iterator = chunks(response)
    body = next(iterator)
    assert [type(item) for item in parse(body)] == [Retry], body
    newer = probe.publish()
    body += next(iterator)
    assert [seq for seq, _ in board_events(body, "vip_pro")] == [newer]

    # A client behind gets what it missed, in order (the history: Last-Event-ID replay).
    behind = probe.stream({"X-API-Key": key, "Last-Event-ID": str(older)})
    assert [seq for seq, _ in board_events(first_chunks(behind, 1), "vip_pro")] == [
        current,
        newer,
    ]


def test_a_reconnect_gets_the_boards_it_missed_then_the_live_ones(probe: Probe) -> None:
    key = probe.key_for("vic", "vip_pro")
    seen = [probe.publish() for _ in range(3)]
    missed = [probe.publish() for _ in range(5)]
    response = probe.stream({"X-API-Key": key, "Last-Event-ID": str(seen[-1])})
    iterator = chunks(response)
    body = next(iterator)
    replayed = board_events(body, "vip_pro")
    assert [seq for seq, _ in replayed] == missed
    # Old boards are served as they are now: their age is the truth about them.
    assert all(board["dataAgeMs"] >= 0 for _, board in replayed)
    live = probe.publish()
    body += next(iterator)
    assert [seq for seq, _ in board_events(body, "vip_pro")] == [*missed, live]


@pytest.mark.parametrize("last_id", ["1", "0", "abc", "-5", "9" * 30, "\uff11\uff12\uff13", ""])
def test_an_id_outside_the_history_gets_the_current_board(probe: Probe, last_id: str) -> None:
    key = probe.key_for("vic", "vip_pro")
    probe.publish()
    current = probe.publish()
    response = probe.stream({"X-API-Key": key, "Last-Event-ID": last_id})
    assert [seq for seq, _ in board_events(first_chunks(response, 1), "vip_pro")] == [current]


def test_stream_before_any_board_starts_with_retry_and_waits(probe: Probe) -> None:
    key = probe.key_for("vic", "vip_pro")
    response = probe.stream({"X-API-Key": key})
    iterator = chunks(response)
    assert [type(item) for item in parse(next(iterator))] == [Retry]
    seq = probe.publish()
    assert [s for s, _ in board_events(next(iterator), "vip_pro")] == [seq]


# -- the per-key limit --------------------------------------------------------------------------


def test_third_stream_of_a_key_is_429_before_any_stream_bytes(limited: Probe) -> None:
    key = limited.key_for("vic", "vip_pro")
    other = limited.key_for("val", "vip_pro")
    limited.publish()
    first, second = (limited.stream({"X-API-Key": key}) for _ in range(2))
    first_chunks(first, 1)
    first_chunks(second, 1)

    third = limited.stream({"X-API-Key": key})
    body = error_of(third, 429, "too_many_streams")
    assert int(third.headers["Retry-After"]) >= 1
    assert body["retryAfterMs"] >= 1000
    assert b"retry:" not in third.get_data() and b"event:" not in third.get_data()

    # The limit is per key: another key of the same owner still streams.
    first_chunks(limited.stream({"X-API-Key": other}), 1)

    # Closing a stream (the client going away) gives its slot back.
    first.close()
    fourth = limited.stream({"X-API-Key": key})
    first_chunks(fourth, 1)
    error_of(limited.stream({"X-API-Key": key}), 429, "too_many_streams")


def test_refused_requests_take_no_slot(limited: Probe) -> None:
    key = limited.key_for("vic", "vip_pro")
    limited.publish()
    first_chunks(limited.stream({"X-API-Key": key}), 1)
    head = limited.client.head(STREAM, headers={"X-API-Key": key})
    assert head.status_code == 200
    assert head.mimetype == "text/event-stream"
    assert head.get_data() == b""
    limited.key_for("ursula", "user")
    # HEAD took no slot: the second stream of the key is still allowed.
    first_chunks(limited.stream({"X-API-Key": key}), 1)


# -- issue 46: the plan's rate limit, the replay's cap, never stored -------------------------


def _configured(database_url: str, **config: str) -> Iterator[Probe]:
    """An app on ``database_url`` with ``config`` on top; closed at the end."""
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, **config})
    handle = Probe(app)
    yield handle
    handle.close_all()
    with app.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def three_a_day(database_url: str) -> Iterator[Probe]:
    """vip_pro accounts may make three requests a day (a day: no window edge in the test)."""
    yield from _configured(database_url, VIP_PRO_RATE_LIMIT="3 per day")


def test_opening_a_stream_counts_against_the_plans_rate_limit(three_a_day: Probe) -> None:
    """One key looping open/close meets the plan's 429 (ErrorResponse, Retry-After) once the
    plan's limit is spent, before any stream byte and before a slot is taken; admin has no
    limit; the per-key cap of open streams is a limit of its own (above)."""
    key = three_a_day.key_for("vic", "vip_pro")
    admin = three_a_day.key_for("root", "admin")
    three_a_day.publish()
    for _ in range(3):
        opened = three_a_day.stream({"X-API-Key": key})
        first_chunks(opened, 1)
        opened.close()
    refused = three_a_day.stream({"X-API-Key": key})
    assert refused.status_code == 429, "the fourth open in a day of three was a stream"
    body = error_of(refused, 429, "rate_limited")
    assert int(refused.headers["Retry-After"]) >= 1
    assert body["retryAfterMs"] >= 1000
    assert b"retry:" not in refused.get_data() and b"event:" not in refused.get_data()
    # The same count as /latest's: the account's reads are spent too.
    latest = three_a_day.client.get("/api/probboard/latest", headers={"X-API-Key": key})
    error_of(latest, 429, "rate_limited")
    for _ in range(5):
        opened = three_a_day.stream({"X-API-Key": admin})
        first_chunks(opened, 1)
        opened.close()


@pytest.fixture
def replay_of_three(database_url: str) -> Iterator[Probe]:
    """An app that replays at most three missed boards (``STREAM_REPLAY_MAX=3``)."""
    yield from _configured(database_url, STREAM_REPLAY_MAX="3")


def test_a_replay_is_capped_then_only_the_newest_board(replay_of_three: Probe) -> None:
    """Up to ``STREAM_REPLAY_MAX`` missed boards are replayed in order; more than that, and
    only the newest goes out (the client then holds the current state), then live ones."""
    probe = replay_of_three
    key = probe.key_for("vic", "vip_pro")
    seen = probe.publish()
    missed = [probe.publish() for _ in range(3)]
    three = probe.stream({"X-API-Key": key, "Last-Event-ID": str(seen)})
    assert [seq for seq, _ in board_events(first_chunks(three, 1), "vip_pro")] == missed
    three.close()

    newest = [probe.publish() for _ in range(40)][-1]
    behind = probe.stream({"X-API-Key": key, "Last-Event-ID": str(seen)})
    iterator = chunks(behind)
    body = next(iterator)
    assert [seq for seq, _ in board_events(body, "vip_pro")] == [newest]
    live = probe.publish()
    body += next(iterator)
    assert [seq for seq, _ in board_events(body, "vip_pro")] == [newest, live]


def test_the_default_replay_cap_is_ten(probe: Probe) -> None:
    """Without ``STREAM_REPLAY_MAX``: ten missed boards come back, eleven give the newest."""
    key = probe.key_for("vic", "vip_pro")
    seen = probe.publish()
    ten = [probe.publish() for _ in range(10)]
    replayed = probe.stream({"X-API-Key": key, "Last-Event-ID": str(seen)})
    assert [seq for seq, _ in board_events(first_chunks(replayed, 1), "vip_pro")] == ten
    replayed.close()
    eleventh = probe.publish()
    capped = probe.stream({"X-API-Key": key, "Last-Event-ID": str(seen)})
    assert [seq for seq, _ in board_events(first_chunks(capped, 1), "vip_pro")] == [eleventh]


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_stream_is_never_stored_and_varies_on_the_key_headers(
    probe: Probe, method: str
) -> None:
    """``Cache-Control: no-store`` and ``Vary`` on the two headers a stream's key comes in
    (sessions open no stream, so the cookie does not change the answer)."""
    key = probe.key_for("vic", "vip_pro")
    probe.publish()
    response = probe.client.open(STREAM, method=method, headers={"X-API-Key": key}, buffered=False)
    probe.open.append(response)
    assert response.status_code == 200
    assert response.headers["Cache-Control"] == "no-store"
    assert {"Authorization", "X-API-Key"} <= {
        v.strip() for v in response.headers["Vary"].split(",")
    }


# -- ?symbol= -------------------------------------------------------------------------------


def _probe(database_url: str, symbols: str, windows: str) -> Iterator[Probe]:
    """An app serving ``symbols`` over ``windows`` whose keys may hold two streams at once,
    its board from a simulated source of the same; closed at the end."""
    config = {"SYMBOLS": symbols, "WINDOWS": windows, "STREAM_MAX_PER_KEY": "2"}
    app = create_app({**BASE_CONFIG, "DATABASE_URL": database_url, **config})
    handle = Probe(app)
    source = SimulatedSource(parse_symbols(symbols), seed=1, spans=parse_windows(windows))
    handle.refresher = Refresher(source, services_of(app).bus, 500)
    yield handle
    handle.close_all()
    with app.app_context():
        from app.extensions import db

        db.session.remove()
        db.engine.dispose()


@pytest.fixture
def markets(database_url: str) -> Iterator[Probe]:
    """An app serving BTC and ETH, whose keys may hold two streams at once."""
    yield from _probe(database_url, "BTC,ETH", "5m")


def symbols_of(boards: list[tuple[int, dict[str, Any]]]) -> list[list[str]]:
    return [[item["symbol"] for item in board["items"]] for _, board in boards]


def side_by_side(
    probe: Probe, query: str, boards: int
) -> tuple[list[tuple[int, dict[str, Any]]], list[tuple[int, dict[str, Any]]], list[int]]:
    """A stream of ``?query`` and an unfiltered one of the same key, over ``boards`` boards
    (the first published before they open): their board events and the boards' seqs."""
    key = probe.key_for("vic", "vip_pro")
    seqs = [probe.publish()]
    asked = probe.client.get(f"{STREAM}?{query}", headers={"X-API-Key": key}, buffered=False)
    probe.open.append(asked)
    everything = probe.stream({"X-API-Key": key})
    asked_chunks, all_chunks = chunks(asked), chunks(everything)
    asked_body, all_body = next(asked_chunks), next(all_chunks)
    for _ in range(boards - 1):
        seqs.append(probe.publish())
        asked_body += next(asked_chunks)
        all_body += next(all_chunks)
    return board_events(asked_body, "vip_pro"), board_events(all_body, "vip_pro"), seqs


def test_a_filtered_stream_carries_only_its_rows_in_every_event(markets: Probe) -> None:
    filtered, full, seqs = side_by_side(markets, "symbol=eth", 4)
    assert [seq for seq, _ in filtered] == [seq for seq, _ in full] == seqs
    assert symbols_of(filtered) == [["ETH"]] * 4
    assert symbols_of(full) == [["BTC", "ETH"]] * 4
    for (_, one), (_, both) in zip(filtered[1:], full[1:], strict=True):
        assert one["items"][0] == both["items"][1]  # rendered at the same instant
        assert one["servedAt"] == both["servedAt"]


def test_a_filtered_replay_carries_only_its_rows(markets: Probe) -> None:
    key = markets.key_for("vic", "vip_pro")
    seen = markets.publish()
    missed = [markets.publish() for _ in range(3)]
    response = markets.client.get(
        f"{STREAM}?symbol=BTC",
        headers={"X-API-Key": key, "Last-Event-ID": str(seen)},
        buffered=False,
    )
    markets.open.append(response)
    replayed = board_events(first_chunks(response, 1), "vip_pro")
    assert [seq for seq, _ in replayed] == missed
    assert symbols_of(replayed) == [["BTC"]] * 3


@pytest.fixture
def windows(database_url: str) -> Iterator[Probe]:
    """An app serving BTC over 5 and 15 minutes, whose keys may hold two streams at once."""
    yield from _probe(database_url, "BTC", "5m,15m")


def test_the_stream_of_one_window_never_carries_the_others(windows: Probe) -> None:
    """Issue 39: without ``?window=`` the stream carries the 5-minute rows only, as before;
    ``?window=15m`` the 15-minute ones only, in every event; a bad window is a 400."""
    long, short, seqs = side_by_side(windows, "window=15m", 3)
    assert [seq for seq, _ in long] == [seq for seq, _ in short] == seqs
    assert [[i.get("window") for i in b["items"]] for _, b in long] == [["15m"]] * 3
    assert [[i.get("window") for i in b["items"]] for _, b in short] == [[None]] * 3
    assert all(i["slot"] % 900 == 0 for _, b in long for i in b["items"])
    key = windows.key_for("vera", "vip_pro")
    error_of(
        windows.client.get(f"{STREAM}?window=1h", headers={"X-API-Key": key}),
        400,
        "invalid_window",
    )


def test_a_filter_is_rendered_once_per_board_not_per_client(
    markets: Probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    renderer = services_of(markets.app).renderer
    filtered: list[tuple[str, ...]] = []
    render = renderer.render

    def counting(*args: Any) -> str:
        if len(args) > 3 and args[3] is not None:
            filtered.append(args[3])
        return render(*args)

    monkeypatch.setattr(renderer, "render", counting)
    key = markets.key_for("vic", "vip_pro")
    other = markets.key_for("val", "vip_pro")
    markets.publish()
    opened = [
        markets.client.get(f"{STREAM}?symbol={value}", headers={"X-API-Key": k}, buffered=False)
        for value, k in (("eth", key), ("ETH", key), ("eth,eth", other))
    ]
    markets.open.extend(opened)
    streams = [chunks(response) for response in opened]
    firsts = [next(stream) for stream in streams]  # each first board is rendered for its client
    assert len(filtered) == 3
    filtered.clear()
    markets.publish()
    events = [next(stream) for stream in streams]
    assert filtered == [("ETH",)]  # once for the three clients
    assert events[0] == events[1] == events[2]
    assert all(symbols_of(board_events(body, "vip_pro")) == [["ETH"]] for body in firsts)


@pytest.mark.parametrize("query", ["symbol=", "symbol=doge", "symbol=xrp", "symbol=eth&symbol=btc"])
def test_a_bad_symbol_is_400_and_takes_no_stream_slot(markets: Probe, query: str) -> None:
    key = markets.key_for("vic", "vip_pro")
    markets.publish()
    for _ in range(3):
        response = markets.client.get(f"{STREAM}?{query}", headers={"X-API-Key": key})
        error_of(response, 400, "invalid_symbol")
        head = markets.client.head(f"{STREAM}?{query}", headers={"X-API-Key": key})
        assert head.status_code == 400
    for _ in range(2):  # both slots of the key are still free
        first_chunks(markets.stream({"X-API-Key": key}), 1)


def test_credentials_come_before_the_symbol_on_the_stream(markets: Probe) -> None:
    error_of(markets.client.get(f"{STREAM}?symbol=doge"), 401, "missing_credentials")
    user = markets.key_for("ursula", "user")
    error_of(
        markets.client.get(f"{STREAM}?symbol=doge", headers={"X-API-Key": user}),
        403,
        "vip_pro_required",
    )
