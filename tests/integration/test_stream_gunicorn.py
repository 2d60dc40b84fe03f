"""The vip_pro stream for real: gunicorn with two gevent workers, a refresher, a redis-server.

Streams are read with a raw-socket client (``harness/stream_client.py``) that checks
the HTTP framing (chunked for HTTP/1.1, until-close for HTTP/1.0) and parses the events twice:
by the SSE rules of the HTML standard and by a naive line splitter. Every board is validated
against the BoardResponse schema and every error against ErrorResponse. Accounts and keys are
made with the documented CLI as its own process, on a PostgreSQL database of this module's own
(as in production) migrated with ``flask db upgrade``. Nothing asserts elapsed time: waits are
generous deadlines, polled.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import redis

from harness.processes import (
    RedisServer,
    Service,
    service_env,
    wait_until,
)
from harness.stream_client import (
    STREAM,
    Closed,
    Comment,
    Event,
    Item,
    ResponseEnd,
    Retry,
    SseParser,
    StreamConnection,
    naive_boards,
    summarize,
)
from tests.conftest import TEST_PEPPER
from tests.support.accounts import AccountsCli, scratch_accounts
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
UNKNOWN_KEY = "pbk_" + "Q" * 43
SLOTS = "probboard:streams:"
BOARD_CHANNEL = "probboard:board"
HISTORY = "probboard:board:history"
RENEW_S = 10.0  # app/stream/ticker.py: leases are renewed this often


# -- accounts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Accounts:
    """A migrated PostgreSQL accounts database, the CLI's environment and the keys it printed."""

    cli: AccountsCli
    keys: dict[str, str]
    key_ids: dict[str, int]

    @property
    def env(self) -> dict[str, str]:
        """The environment a service needs for this database."""
        return self.cli.env


# key name -> (account, plan of the account when the key is made)
KEYS = {
    "wire": ("vic", "vip_pro"),
    "limit": ("vic", "vip_pro"),
    "admin": ("root", "admin"),
    "user": ("ursula", "vip_pro"),  # downgraded to user after the key is made
    "revoked": ("rita", "vip_pro"),
    "downgraded": ("dan", "vip_pro"),
    "disabled": ("dora", "vip_pro"),
}


@pytest.fixture(scope="module")
def accounts() -> Iterator[Accounts]:
    """A PostgreSQL database of this module's own with the accounts and keys of ``KEYS``, made
    by the documented commands run in this process (tests/support/accounts.py)."""
    with scratch_accounts() as cli:
        for account, plan in dict(KEYS.values()).items():
            cli.create_user(account, plan)
        keys = {name: cli.issue_key(account) for name, (account, _) in KEYS.items()}
        cli.run("users", "set-plan", "ursula", "user")
        key_ids = {name: cli.key_id(key) for name, key in keys.items()}
        yield Accounts(cli=cli, keys=keys, key_ids=key_ids)


def configure(service: Service, redis_url: str, accounts: Accounts, **settings: str) -> None:
    service.env.update(
        REDIS_URL=redis_url,
        DATABASE_URL=accounts.env["DATABASE_URL"],
        API_KEY_PEPPER=TEST_PEPPER,
        **settings,
    )


def start(service: Service, refresher: bool = True) -> None:
    """gunicorn with two workers and (by default) the refresher; waits for a first board."""
    service.start_web(workers=2)
    if refresher:
        service.start_refresher()
        assert wait_until(lambda: latest(service)["updatedAt"] is not None, timeout=30), (
            service.refresher.output() if service.refresher else ""
        )


def latest(service: Service) -> dict[str, Any]:
    status, _, body = service.get(LATEST)
    assert status == 200, body
    return validated("board", body)


def slots_held(redis_url: str, key_id: int) -> int:
    return int(redis.Redis.from_url(redis_url).zcard(f"{SLOTS}{key_id}"))


# -- streams ----------------------------------------------------------------------------------


def open_stream(
    service: Service, key: str, headers: Mapping[str, str] | None = None, **options: Any
) -> StreamConnection:
    """A stream that must be accepted (200 text/event-stream)."""
    conn = StreamConnection(service.port, {"X-API-Key": key, **(headers or {})}, **options)
    assert conn.status == 200, (conn.status, bytes(conn.body))
    return conn


def open_when_free(
    service: Service,
    key: str,
    headers: Mapping[str, str] | None = None,
    timeout: float = 20.0,
    **options: Any,
) -> StreamConnection:
    """A stream of ``key``, retried while the key's slots are still held (429)."""
    deadline = time.monotonic() + timeout
    while True:
        conn = StreamConnection(service.port, {"X-API-Key": key, **(headers or {})}, **options)
        if conn.status == 200 or time.monotonic() > deadline:
            assert conn.status == 200, (conn.status, bytes(conn.body))
            return conn
        assert conn.status == 429, (conn.status, bytes(conn.body))
        conn.close()
        time.sleep(0.2)


def check_refused(conn: StreamConnection, status: int, code: str) -> dict[str, Any]:
    """An ErrorResponse answer, and not one byte of a stream."""
    assert conn.status == status, (conn.status, bytes(conn.body))
    assert conn.headers["content-type"].startswith("application/json"), conn.headers
    assert b"retry:" not in conn.body and b"event:" not in conn.body
    body = validated("error", bytes(conn.body))
    assert body["code"] == code, body
    return body


def board_of(event: Event, plan: str = "vip_pro") -> dict[str, Any]:
    assert event.type == "board", event
    board = validated("board", event.data)
    assert board["plan"] == plan, board
    return board


def read_boards(conn: StreamConnection, count: int, timeout: float = 30.0) -> list[Event]:
    """The next ``count`` board events (the stream must not end meanwhile)."""
    return [conn.next_event(timeout, f"board {i + 1}/{count}") for i in range(count)]


def events_in(items: list[Item]) -> list[Event]:
    return [item for item in items if isinstance(item, Event)]


def check_events(conn: StreamConnection, plan: str = "vip_pro") -> None:
    """Every event the stream carried so far is a valid board of ``plan`` or a valid error."""
    for event in events_in(conn.history):
        if event.type == "error":
            validated("error", event.data)
        else:
            board_of(event, plan)


def parsed_both_ways(body: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The boards of a whole-event prefix of ``body``, by the SSE rules and by line split,
    which must agree."""
    cut = body.rfind(b"\n\n") + 2
    prefix = body[:cut]
    spec = [item for item in SseParser().feed(prefix) if isinstance(item, Event)]
    assert spec and all(e.type == "board" for e in spec), summarize(spec)
    by_spec = [(int(e.id), validated("board", e.data)) for e in spec]
    by_lines = [(int(i or "0"), validated("board", json.dumps(b))) for i, b in naive_boards(prefix)]
    assert by_lines == by_spec
    return by_spec


def worker_pids(master: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                found.append(int(entry))
    return found


def worker_of(service: Service, conn: StreamConnection) -> int:
    """The pid of the gunicorn worker holding ``conn``'s server side (from /proc)."""
    assert service.web is not None
    inode = None
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)
        if local == service.port and remote == conn.local_port:
            inode = fields[9]
    assert inode is not None, "the server side of the connection is not in /proc/net/tcp"
    for pid in worker_pids(service.web.pid):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") == f"socket:[{inode}]":
                    return pid
            except OSError:
                continue
    raise AssertionError("no worker holds the connection")


class Published:
    """Every board sequence number published on the Redis channel (a subscriber thread)."""

    def __init__(self, redis_url: str) -> None:
        self.seqs: list[int] = []
        # Keep the client: collecting it would close the pool, the pubsub connection with it.
        self._client = redis.Redis.from_url(redis_url)
        self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
        self._pubsub.subscribe(BOARD_CHANNEL)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            message = self._pubsub.get_message(timeout=0.2)
            if message is not None:
                self.seqs.append(int(json.loads(message["data"])["seq"]))

    def upto(self, seq: int) -> list[int]:
        """The sequence numbers published up to ``seq``, once ``seq`` itself has been seen."""
        assert wait_until(lambda: any(s >= seq for s in self.seqs), timeout=10), (seq, self.seqs)
        return [s for s in self.seqs if s <= seq]

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._pubsub.close()
        self._client.close()


# == one live service for the access, wire-format, limit and revocation tests ================


@dataclass
class Live:
    service: Service
    redis: RedisServer
    accounts: Accounts


@pytest.fixture(scope="class")
def live(tmp_path_factory: pytest.TempPathFactory, accounts: Accounts) -> Iterator[Live]:
    workdir = tmp_path_factory.mktemp("stream-live")
    server = RedisServer(workdir)
    server.start()
    service = Service(workdir, service_env())
    try:
        configure(service, server.url, accounts, STREAM_MAX_PER_KEY="2")
        start(service)
        yield Live(service, server, accounts)
    finally:
        service.stop()
        server.stop()


class TestLiveStream:
    """gunicorn (2 gevent workers) + refresher at the 500 ms cadence, STREAM_MAX_PER_KEY=2."""

    def test_access_rules(self, live: Live) -> None:
        """No key, an unknown key and a user-plan key are refused; an admin key streams."""
        service, keys = live.service, live.accounts.keys
        missing = StreamConnection(service.port)
        check_refused(missing, 401, "missing_credentials")
        assert missing.headers["www-authenticate"].startswith("Bearer")
        check_refused(
            StreamConnection(service.port, {"X-API-Key": UNKNOWN_KEY}), 401, "invalid_key"
        )
        check_refused(
            StreamConnection(service.port, {"Authorization": f"Bearer {keys['user']}"}),
            403,
            "vip_pro_required",
        )
        with StreamConnection(service.port, {"Authorization": f"Bearer {keys['admin']}"}) as admin:
            assert admin.status == 200
            board_of(admin.next_event(15, "the first board"), plan="admin")
            board_of(admin.next_event(15, "the next board"), plan="admin")
            check_events(admin, plan="admin")

    @pytest.mark.parametrize("http10", [False, True], ids=["http1.1-chunked", "http1.0"])
    def test_wire_format(self, live: Live, http10: bool) -> None:
        """Headers, framing and events are right; every published board arrives, in order."""
        published = Published(live.redis.url)
        conn = open_when_free(
            live.service,
            live.accounts.keys["wire"],
            http10=http10,
            headers={"Accept-Encoding": "gzip, deflate, br"},
        )
        with conn:
            headers = conn.headers
            assert headers["content-type"].split(";")[0].strip() == "text/event-stream"
            # Never stored by a cache in front, and keyed on the credentials if it were.
            assert headers["cache-control"] == "no-store"
            assert {"Authorization", "X-API-Key"} <= {
                name.strip() for name in headers.get("vary", "").split(",")
            }, headers
            assert headers["x-accel-buffering"] == "no"
            assert "content-encoding" not in headers
            assert "content-length" not in headers
            if http10:
                assert "transfer-encoding" not in headers
            else:
                assert headers["transfer-encoding"].lower() == "chunked"

            first, before = conn.wait_event(15, "the first event")
            assert len(before) == 1 and isinstance(before[0], Retry), summarize(before)
            assert conn.body.startswith(f"retry: {before[0].ms}\n\n".encode())
            events = [first, *read_boards(conn, 6)]
            body = bytes(conn.body)

        assert not conn.parser.unknown_fields
        boards = parsed_both_ways(body)
        assert len(boards) >= len(events)
        assert [(int(e.id), board_of(e)) for e in events] == boards[: len(events)]
        ids = [seq for seq, _ in boards]
        assert all(b > a for a, b in itertools.pairwise(ids)), ids
        # Every board the refresher published (every 500 ms) came, in order, none skipped.
        window = [seq for seq in published.upto(ids[-1]) if seq > ids[0]]
        published.stop()
        assert window == ids[1:], (window, ids)
        updated = [board["updatedAt"] for _, board in boards]
        assert updated == sorted(set(updated)), updated
        # Exactly id, event, data per event: a board is never split over several data lines.
        for block in body.split(b"\n\n")[1:-1]:
            names = [line.split(b":", 1)[0] for line in block.split(b"\n")]
            assert names == [b"id", b"event", b"data"], block[:200]

    def test_opens_with_jittered_retry_then_the_current_board_at_once(self, live: Live) -> None:
        """A stream opens with a jittered retry, then the current board without waiting."""
        service, key = live.service, live.accounts.keys["wire"]
        retries: list[int] = []
        matched = 0
        for _ in range(6):
            current = latest(service)["updatedAt"]
            conn = open_when_free(service, key)
            try:
                first, before = conn.wait_event(15, "the first event")
            finally:
                conn.abort()
            assert [type(item) for item in before] == [Retry], summarize(before)
            assert isinstance(before[0], Retry)
            retries.append(before[0].ms)
            updated = board_of(first)["updatedAt"]
            # Never an older board; the very board /latest had unless a tick fell in between.
            assert updated >= current, (updated, current)
            matched += updated == current
        assert all(1500 <= ms <= 2500 for ms in retries), retries  # STREAM_RETRY_MS ±25 %
        assert len(set(retries)) > 1, f"no jitter: {retries}"
        # A server that waited for the next board would never send the board of /latest.
        assert matched >= 1

    def test_a_reconnect_with_last_event_id_gets_every_board_it_missed(self, live: Live) -> None:
        """Away for two seconds, back with its last id: every board published meanwhile, in
        order, as the Redis history holds them, then the live ones (either worker)."""
        service, key = live.service, live.accounts.keys["wire"]
        first = open_when_free(service, key)
        try:
            last_id = read_boards(first, 2)[-1].id
        finally:
            first.close()
        time.sleep(2.0)  # the refresher goes on publishing while the client is away
        history = redis.Redis.from_url(live.redis.url).xrange(
            "probboard:board:history", min=f"{int(last_id) + 1}-0", max="+"
        )
        ids_held = [entry_id for entry_id, _ in history or []]
        missed = [bytes(i).decode().split("-")[0] for i in ids_held if isinstance(i, bytes)]
        assert len(missed) >= 3, missed
        for http10 in (False, True):
            again = open_when_free(service, key, {"Last-Event-ID": last_id}, http10=http10)
            try:
                replayed = read_boards(again, len(missed) + 1)
                ids = [event.id for event in replayed]
                assert ids[: len(missed)] == missed, (ids, missed)
                assert all(int(a) < int(b) for a, b in itertools.pairwise(ids)), ids
                for event in replayed:
                    board_of(event)
                check_events(again)
            finally:
                again.close()

    def test_last_event_id_of_the_oldest_board_gets_the_newest_only(self, live: Live) -> None:
        """Issue 46: an id as old as the history's oldest (two minutes of boards) replays
        nothing old: more than ``STREAM_REPLAY_MAX`` (10) missed, and the first event is the
        newest board, then the live ones follow."""
        service, key = live.service, live.accounts.keys["wire"]
        stored = redis.Redis.from_url(live.redis.url)

        def held() -> list[int]:
            entries = stored.xrange(HISTORY) or []
            return [int(i.decode().split("-")[0]) for i, _ in entries if isinstance(i, bytes)]

        assert wait_until(lambda: len(held()) > 12, timeout=30), held()
        ids = held()
        conn = open_when_free(service, key, {"Last-Event-ID": str(ids[0])})
        try:
            first, before = conn.wait_event(15, "the first event")
            assert [type(item) for item in before] == [Retry], summarize(before)
            assert int(first.id) >= ids[-1], (first.id, ids)  # never an old board
            board_of(first)
            following = conn.next_event(15, "the next board")
            assert int(following.id) > int(first.id)
            board_of(following)
            check_events(conn)
        finally:
            conn.close()

    def test_third_stream_of_a_key_is_429_across_workers_and_slots_come_back(
        self, live: Live
    ) -> None:
        """A key's third stream is refused across workers; its slots come back on close."""
        service, redis_url = live.service, live.redis.url
        key, key_id = live.accounts.keys["limit"], live.accounts.key_ids["limit"]
        first = open_stream(service, key)
        first_worker = worker_of(service, first)
        second = None
        for _ in range(20):  # until the two streams sit on different workers
            second = open_when_free(service, key)
            if worker_of(service, second) != first_worker:
                break
            second.abort()
        else:
            pytest.fail("20 streams in a row landed on the same worker")
        assert second is not None
        for conn in (first, second):
            board_of(conn.next_event(15, "the first board"))
        assert slots_held(redis_url, key_id) == 2

        # Each worker holds one stream: only a count shared through Redis refuses a third.
        for _ in range(4):
            third = StreamConnection(service.port, {"Authorization": f"Bearer {key}"})
            body = check_refused(third, 429, "too_many_streams")
            assert int(third.headers["retry-after"]) >= 1
            assert body["retryAfterMs"] >= 1000
            third.close()

        # A client that goes away (no goodbye but its FIN) gives its slot back.
        first.close()
        accepted: list[StreamConnection] = []

        def reopened() -> bool:
            conn = StreamConnection(service.port, {"X-API-Key": key})
            if conn.status == 200:
                accepted.append(conn)
                return True
            check_refused(conn, 429, "too_many_streams")
            conn.close()
            return False

        assert wait_until(reopened, timeout=20, interval=0.25), "the closed stream kept its slot"
        board_of(accepted[0].next_event(15, "the first board"))
        second.close()
        accepted[0].close()
        assert wait_until(lambda: slots_held(redis_url, key_id) == 0, timeout=20), (
            f"{slots_held(redis_url, key_id)} leases left after every client went away"
        )

    def test_revoked_downgraded_or_disabled_keys_lose_their_streams(self, live: Live) -> None:
        """Revoking, downgrading or disabling with the CLI ends open streams with an error."""
        service, accounts = live.service, live.accounts
        cases = {
            "revoked": ("invalid_key", ("keys", "revoke", accounts.keys["revoked"])),
            "downgraded": ("vip_pro_required", ("users", "set-plan", "dan", "user")),
            "disabled": ("invalid_key", ("users", "disable", "dora")),
        }
        streams = {name: open_stream(service, accounts.keys[name]) for name in cases}
        for conn in streams.values():
            board_of(conn.next_event(15, "the first board"))
        for _, command in cases.values():
            accounts.cli.run(*command)

        try:
            for name, (code, _) in cases.items():
                conn = streams[name]
                error, _ = conn.wait_event(
                    40,
                    f"the error event ending the {name} key's stream",
                    lambda e: e.type != "board",
                )
                assert error.type == "error", error
                body = validated("error", error.data)
                assert body["code"] == code, body
                _, between = conn.wait_for(
                    lambda i: isinstance(i, ResponseEnd), 15, "the end of the response"
                )
                assert events_in(between) == [], summarize(between)
                closed, _ = conn.wait_for(lambda i: isinstance(i, Closed), 15, "the server's close")
                assert isinstance(closed, Closed) and closed.error is None, closed
                key_id = accounts.key_ids[name]
                assert wait_until(
                    lambda key_id=key_id: slots_held(live.redis.url, key_id) == 0,
                    timeout=15,
                )
                again = StreamConnection(service.port, {"X-API-Key": accounts.keys[name]})
                check_refused(again, 403 if code == "vip_pro_required" else 401, code)
                check_events(conn)
        finally:
            for conn in streams.values():
                conn.close()


# == opening streams counts against the plan's rate limit ===================================


def test_a_stream_open_close_loop_meets_the_plans_rate_limit(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Issue 46: one key opening and closing streams in a loop is refused (429
    ``rate_limited``, the ErrorResponse, ``Retry-After``) once its plan's limit is spent,
    counted in Redis across both workers; the per-key cap of open streams (10 here) is never
    what refuses it."""
    configure(
        service,
        fresh_redis.url,
        accounts,
        VIP_PRO_RATE_LIMIT="6 per hour",
        STREAM_MAX_PER_KEY="10",
    )
    # Own gunicorn: its plan's rate limit (6 per hour) is this test's to spend.
    start(service, refresher=False)  # no board needed: the answer's status is the point
    key = accounts.keys["wire"]
    for _ in range(6):
        open_stream(service, key).close()
    refused = StreamConnection(service.port, {"X-API-Key": key})
    try:
        body = check_refused(refused, 429, "rate_limited")
        assert int(refused.headers["retry-after"]) >= 1
        assert body["retryAfterMs"] >= 1000
    finally:
        refused.close()
    # /latest counts in the same window: the account's reads are spent too.
    status, headers, answer = service.get(LATEST, {"X-API-Key": key})
    assert status == 429 and validated("error", answer)["code"] == "rate_limited"
    assert int(headers["Retry-After"]) >= 1


# == a service whose board does not change: first event, Last-Event-ID, heartbeats ==========


def test_quiet_board_first_event_last_event_id_and_heartbeats(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """A still board: sent once, Last-Event-ID skips or resends it, heartbeats flow."""
    # Staleness far away: nothing is re-sent while the board stands still.
    configure(
        service,
        fresh_redis.url,
        accounts,
        STALE_THRESHOLD_MS="600000",
        SEVERE_STALE_THRESHOLD_MS="1200000",
    )
    # Own gunicorn and refresher: the test stops the refresher to keep the board quiet.
    start(service)
    assert service.refresher is not None
    service.refresher.stop()
    time.sleep(0.5)  # a board published just before the stop has reached the workers
    current = latest(service)
    key = accounts.keys["wire"]

    plain = open_stream(service, key)
    # Nothing is published any more: a board event can only be "the current board at once".
    first, before = plain.wait_event(10, "the first event")
    assert [type(i) for i in before] == [Retry]
    assert board_of(first)["updatedAt"] == current["updatedAt"]
    current_id = first.id

    same = open_stream(service, key, {"Last-Event-ID": current_id})
    older = open_stream(service, key, {"Last-Event-ID": str(int(current_id) - 500)}, http10=True)
    behind, before = older.wait_event(10, "the current board")
    assert [type(i) for i in before] == [Retry]
    assert behind.id == current_id
    assert board_of(behind)["updatedAt"] == current["updatedAt"]

    try:
        for conn in (plain, same, older):
            # HEARTBEAT_S is 15: one comment is due within 25 s, and nothing else.
            _, before = conn.wait_for(lambda i: isinstance(i, Comment), 25, "a heartbeat")
            if conn is same:
                assert [type(i) for i in before] == [Retry], summarize(before)
            else:
                assert before == [], summarize(before)
        assert b"\n\n: " in bytes(same.body) or bytes(same.body).startswith(b": ")
        assert events_in(same.history) == [], "the board the client already had was sent again"
        for conn in (plain, same, older):
            check_events(conn)
    finally:
        for conn in (plain, same, older):
            conn.close()


# == a stale board is re-sent with its age growing =========================================


def test_stale_board_is_resent_with_its_age_and_latency_level(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """A board that stops changing is re-sent with its growing age and latency level."""
    configure(
        service,
        fresh_redis.url,
        accounts,
        STALE_THRESHOLD_MS="1000",
        SEVERE_STALE_THRESHOLD_MS="3500",
    )
    # Own gunicorn and refresher: its stale thresholds; the test stops the refresher.
    start(service)
    assert service.refresher is not None
    conns = [open_stream(service, accounts.keys["wire"], http10=http10) for http10 in (False, True)]
    try:
        for conn in conns:
            for event in read_boards(conn, 2):
                assert board_of(event)["latencyLevel"] == "ok"
        service.refresher.stop()
        levels = {"ok": 0, "warn": 1, "danger": 2}
        for conn in conns:
            danger, before = conn.wait_event(
                30,
                "the board re-sent as danger",
                lambda e: json.loads(e.data)["latencyLevel"] == "danger",
            )
            events = [*events_in(before), danger]
            same = [e for e in events if e.id == danger.id]
            assert events[-len(same) :] == same, "a new id after the refresher stopped"
            boards = [board_of(e) for e in same]
            assert len({b["updatedAt"] for b in boards}) == 1
            ages = [b["dataAgeMs"] for b in boards]
            assert ages == sorted(ages) and ages[0] < ages[-1], ages
            seen = [b["latencyLevel"] for b in boards]
            assert [levels[s] for s in seen] == sorted(levels[s] for s in seen), seen
            assert "warn" in seen, seen
            for board in boards:
                assert board["isStale"] is (board["latencyLevel"] != "ok")
                if board["latencyLevel"] == "warn":
                    assert 1000 < board["dataAgeMs"] <= 3500
                if board["latencyLevel"] == "danger":
                    assert board["dataAgeMs"] > 3500
            check_events(conn)
    finally:
        for conn in conns:
            conn.close()


# == Redis restarts under open streams ======================================================


@dataclass
class Restarted:
    service: Service
    redis: RedisServer
    accounts: Accounts
    streams: list[StreamConnection]
    last_id_before: int
    back_at: float
    during_outage: list[list[Item]] = field(default_factory=list)


@pytest.fixture(scope="class")
def restarted(tmp_path_factory: pytest.TempPathFactory, accounts: Accounts) -> Iterator[Restarted]:
    """Four open streams of one key (STREAM_MAX_PER_KEY=4); Redis stopped for 3 s, started."""
    workdir = tmp_path_factory.mktemp("stream-restart")
    server = RedisServer(workdir)
    server.start()
    service = Service(workdir, service_env())
    streams: list[StreamConnection] = []
    try:
        configure(service, server.url, accounts, STREAM_MAX_PER_KEY="4")
        start(service)
        key = accounts.keys["wire"]
        streams = [open_stream(service, key, http10=i % 2 == 1) for i in range(4)]
        last = 0
        for conn in streams:
            last = max([last, *(int(e.id) for e in read_boards(conn, 2))])
        server.stop()
        time.sleep(3)
        outage = [conn.drain() for conn in streams]
        server.start()
        yield Restarted(service, server, accounts, streams, last, time.monotonic(), outage)
    finally:
        for conn in streams:
            conn.close()
        service.stop()
        server.stop()


class TestRedisRestart:
    def test_streams_stay_open_and_resume(self, restarted: Restarted) -> None:
        """Streams stay open through a Redis restart and resume with later boards."""
        for items in restarted.during_outage:
            assert not any(isinstance(i, Closed | ResponseEnd) for i in items), summarize(items)
        for conn in restarted.streams:
            newer, _ = conn.wait_event(
                45,
                "a board published after Redis came back",
                lambda e: int(e.id) > restarted.last_id_before,
            )
            board_of(newer)
            board_of(conn.next_event(15, "the board after that"))
            check_events(conn)

    def test_open_streams_still_count_against_the_limit(self, restarted: Restarted) -> None:
        """Streams opened before a Redis restart still count against the per-key limit after it."""
        # The four streams opened before the restart are still open and must still count:
        # their leases were lost with Redis' data, and renewal runs every RENEW_S.
        time.sleep(max(0.0, restarted.back_at + RENEW_S + 3 - time.monotonic()))
        for conn in restarted.streams:
            assert not any(isinstance(i, Closed) for i in conn.history), summarize(conn.history)
        key = restarted.accounts.keys["wire"]
        held = slots_held(restarted.redis.url, restarted.accounts.key_ids["wire"])
        fifth = StreamConnection(restarted.service.port, {"X-API-Key": key})
        try:
            assert fifth.status == 429, (
                f"a fifth stream of a key with 4 open streams (STREAM_MAX_PER_KEY=4) was "
                f"accepted after a Redis restart; leases in Redis: {held}"
            )
            check_refused(fifth, 429, "too_many_streams")
        finally:
            fifth.close()


# == SIGTERM ends every stream promptly =======================================================


def test_sigterm_ends_every_stream_with_a_final_comment(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """SIGTERM ends every stream with a final comment and a clean close, promptly."""
    configure(service, fresh_redis.url, accounts)
    # Own gunicorn and refresher: the test SIGTERMs gunicorn.
    start(service)
    assert service.web is not None
    conns = [open_stream(service, accounts.keys["wire"], http10=i % 2 == 1) for i in range(4)]
    try:
        for conn in conns:
            board_of(conn.next_event(15, "the first board"))
        service.web.signal(signal.SIGTERM)
        for conn in conns:
            # 8 s per read: a worker waiting out graceful_timeout (10 s) fails this.
            farewell, _ = conn.wait_for(lambda i: isinstance(i, Comment), 8, "the final comment")
            assert isinstance(farewell, Comment) and "shutting down" in farewell.text, farewell
            _, between = conn.wait_for(lambda i: isinstance(i, ResponseEnd), 8, "the end")
            assert between == [], summarize(between)
            closed, _ = conn.wait_for(lambda i: isinstance(i, Closed), 8, "EOF")
            assert isinstance(closed, Closed) and closed.error is None, closed
            check_events(conn)
        assert service.web.popen.wait(30) == 0, service.web.output()
        assert "graceful timeout" not in service.web.output()
    finally:
        for conn in conns:
            conn.close()


# == a client that stops reading ===============================================================


@dataclass
class Stalled:
    service: Service
    redis: RedisServer
    accounts: Accounts
    slow: StreamConnection
    normal: list[StreamConnection]
    published: Published


@pytest.fixture(scope="class")
def stalled(tmp_path_factory: pytest.TempPathFactory, accounts: Accounts) -> Iterator[Stalled]:
    """One stream that never reads (tiny receive buffer) beside three that do; 4 per key."""
    workdir = tmp_path_factory.mktemp("stream-slow")
    server = RedisServer(workdir)
    server.start()
    service = Service(workdir, service_env())
    conns: list[StreamConnection] = []
    published: Published | None = None
    try:
        configure(
            service,
            server.url,
            accounts,
            STREAM_MAX_PER_KEY="4",
            STREAM_WRITE_TIMEOUT_S="2",
            # Ten boards a second: more pressure on the fan-out, and a stalled client's
            # buffers fill five times sooner than at the 500 ms cadence.
            REFRESH_TICK_MS="100",
        )
        start(service)
        published = Published(server.url)
        key = accounts.keys["wire"]
        slow = StreamConnection(service.port, {"X-API-Key": key}, read=False, rcvbuf=4096)
        assert slow.status == 200
        conns.append(slow)
        normal = [open_stream(service, key, http10=i == 2) for i in range(3)]
        conns.extend(normal)
        # All four hold a slot now: the stalled one may be dropped (its write timeout) during
        # whichever test runs first, so this is checked here, not in the test of its drop.
        assert slots_held(server.url, accounts.key_ids["wire"]) == 4
        yield Stalled(service, server, accounts, slow, normal, published)
    finally:
        if published is not None:
            published.stop()
        for conn in conns:
            conn.close()
        service.stop()
        server.stop()


class TestSlowClient:
    def test_a_stalled_client_never_delays_the_others(self, stalled: Stalled) -> None:
        """A client that stops reading delays no other client: they get every board, in order."""
        received: list[list[int]] = [[] for _ in stalled.normal]
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            for ids, conn in zip(received, stalled.normal, strict=True):
                item = conn.next_item(0.05)
                assert not isinstance(item, Closed | ResponseEnd), item
                if isinstance(item, Event):
                    board_of(item)
                    ids.append(int(item.id))
        for ids, conn in zip(received, stalled.normal, strict=True):
            for event in events_in(conn.drain()):
                board_of(event)
                ids.append(int(event.id))
            assert len(ids) >= 20, ids
            assert ids == sorted(set(ids)), ids
            # Every board published while the stream was read reached it: none skipped.
            window = [seq for seq in stalled.published.upto(ids[-1]) if seq >= ids[0]]
            missing = sorted(set(window) - set(ids))
            assert not missing, f"boards skipped by a reading client: {missing}"
            check_events(conn)

    def test_a_stalled_client_is_dropped_and_frees_its_slot(self, stalled: Stalled) -> None:
        """A client that stops reading is dropped after the write timeout, and its slot is freed."""
        redis_url, key_id = stalled.redis.url, stalled.accounts.key_ids["wire"]
        # STREAM_WRITE_TIMEOUT_S=2: once the server cannot hand the stalled client a write
        # it must let go. By the deadline the server has pushed ~250 KB of boards at it.
        dropped = wait_until(lambda: slots_held(redis_url, key_id) < 4, timeout=20, interval=0.5)
        assert dropped, (
            "a client that has read nothing for ~30 s at 10 boards/s still holds its stream"
        )
        for conn in stalled.normal:
            assert not any(isinstance(i, Closed) for i in conn.history)
        with open_stream(stalled.service, stalled.accounts.keys["wire"]) as fresh:
            board_of(fresh.next_event(15, "the first board"))


# == ?symbol=: the broker's direct writes carry each filter's rows ===========================


def test_filtered_streams_get_only_their_rows_in_every_event(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Two markets; streams of one, of both asked in another order (HTTP/1.0), and of all:
    every board (the first, then the broker's direct writes) holds the rows asked for."""
    configure(service, fresh_redis.url, accounts, SYMBOLS="BTC,ETH")
    # Own gunicorn and refresher: on this test's symbols (BTC,ETH).
    start(service)
    key = accounts.keys["wire"]
    bad = StreamConnection(service.port, {"X-API-Key": key}, path=f"{STREAM}?symbol=doge")
    check_refused(bad, 400, "invalid_symbol")
    bad.close()
    streams = {
        "ETH": open_stream(service, key, path=f"{STREAM}?symbol=eth"),
        "BTC,ETH": open_stream(service, key, path=f"{STREAM}?symbol=ETH,btc", http10=True),
        "all": open_stream(service, key),
    }
    try:
        for name, conn in streams.items():
            wanted = ["ETH"] if name == "ETH" else ["BTC", "ETH"]
            boards = [board_of(event) for event in read_boards(conn, 4)]
            assert [[i["symbol"] for i in b["items"]] for b in boards] == [wanted] * 4, name
            check_events(conn)
    finally:
        for conn in streams.values():
            conn.close()


def test_a_line_splitting_client_reads_the_default_board_of_two_windows_unchanged(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Issue 39, done when: with ``WINDOWS=5m,15m`` the stream without a parameter is the
    contract's 5-minute board, as a public client that splits the body on lines reads it
    (``slot`` the 5-minute start its slug ends with, no new field, no 15-minute row); the
    ``?window=15m`` stream never carries a 5-minute row."""
    configure(service, fresh_redis.url, accounts, SYMBOLS="BTC,ETH", WINDOWS="5m,15m")
    # Own gunicorn and refresher: on this test's symbols and windows (5m,15m).
    start(service)
    key = accounts.keys["wire"]
    default = open_stream(service, key, http10=True)
    fifteen = open_stream(service, key, path=f"{STREAM}?window=15m")
    try:
        read_boards(default, 4)
        boards = parsed_both_ways(bytes(default.body))
        items = [item for _, board in boards for item in board["items"]]
        assert {item["symbol"] for item in items} == {"BTC", "ETH"}
        for item in items:
            assert "window" not in item, item
            assert item["slot"] % 300 == 0 and item["slot"] == item["windowStart"], item
            assert item["windowEnd"] - item["windowStart"] == 300, item
            assert 0 <= item["rem_secs"] <= 300, item
        for event in read_boards(fifteen, 4):
            rows = board_of(event)["items"]
            assert {row["symbol"] for row in rows} == {"BTC", "ETH"}, rows
            for row in rows:
                assert row["window"] == "15m" and row["slot"] % 900 == 0, row
                assert row["windowEnd"] - row["windowStart"] == 900, row
        check_events(fifteen)
    finally:
        default.close()
        fifteen.close()
