"""Fault suite, Redis (issue 15): crowds, a hung Redis and a killed one, for real.

Real processes only: gunicorn with two gevent workers, real redis-servers (a test's own
where it stops, hangs or kills it), the refresher when boards are needed, and accounts on a
PostgreSQL database of the module's own (as in production), made with the CLI. Crowds of
simultaneous requests come from one process (``tests/support/crowd.py``): every connection
is established first, then every request is written in the same instant.

The bounds below are the behaviour under test (seconds, generous); nothing else is timed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest

from harness.processes import RedisServer, Service, http_get, wait_until
from harness.stream_client import Closed, Event, ResponseEnd, StreamConnection
from tests.integration.faults.conftest import Accounts, ServiceFactory, leases
from tests.integration.faults.conftest import start_service as serve
from tests.support.contract import validated
from tests.support.crowd import Answer, Request, fire, open_streams, tally

LATEST = "/api/probboard/latest"
HEALTH = "/api/health"
MAX_STREAMS = 5
RENEWED_AFTER_S = 3.0  # failed renewals are retried every second: leases are back by then


def start_service(
    make_service: ServiceFactory,
    redis_server: RedisServer,
    accounts: Accounts,
    refresher: bool = True,
    **settings: str,
) -> Service:
    """gunicorn on ``redis_server`` and the accounts database; the refresher by default."""
    return serve(make_service, redis_server, accounts.database_url, refresher, **settings)


def check_refusal(answer: Answer) -> None:
    """A refused stream: 429 too_many_streams or 503, as an ErrorResponse with Retry-After."""
    assert answer.status in (429, 503), answer.outcome()
    if answer.status == 429:
        assert answer.code == "too_many_streams", answer.body[:300]
    assert "retry-after" in answer.headers, answer.headers
    validated("error", answer.body)


# == a) the pool limit is not an outage ======================================================


def test_a_crowd_of_stream_opens_on_one_key_admits_at_most_the_limit(
    make_service: ServiceFactory, fresh_redis: RedisServer, pg_accounts: Accounts
) -> None:
    """Figure: 400 simultaneous stream opens on ONE vip_pro key (STREAM_MAX_PER_KEY=5, two
    workers, Redis up) admit at most 5 streams; every other open is refused with 429
    too_many_streams or 503, with Retry-After; no other status, none unanswered in 30 s.
    (The issue: 15 admitted, a busy worker taking its own pool limit for a Redis outage.)"""
    # Own gunicorn and refresher: this test's stream cap and VIP limit.
    service = start_service(
        make_service,
        fresh_redis,
        pg_accounts,
        STREAM_MAX_PER_KEY=str(MAX_STREAMS),
        # The subject is the cap on open streams; since issue 46 each open also counts
        # against the plan's rate limit, which 400 opens at once would meet first.
        VIP_PRO_RATE_LIMIT="100000 per minute",
    )
    answers = open_streams(service.port, 400, {"X-API-Key": pg_accounts.key}, timeout=30)
    outcomes = dict(tally(answers))
    admitted = [a for a in answers if a.status == 200]
    assert 1 <= len(admitted) <= MAX_STREAMS, f"{len(admitted)} streams admitted: {outcomes}"
    for answer in admitted:
        assert answer.stream_started and answer.has_board, answer.body[:300]
    for answer in answers:
        if answer.status != 200:
            check_refusal(answer)


# == b) health under a crowd ==================================================================


def test_a_crowd_of_health_checks_never_reports_redis_down(
    make_service: ServiceFactory, fresh_redis: RedisServer, pg_accounts: Accounts
) -> None:
    """Figure: 1,000 simultaneous /api/health with Redis up answer 200 with redisReady true
    every time: redisReady false 0 times (the issue: 384 times)."""
    # Own gunicorn: the only test here without a refresher, on default settings.
    service = start_service(make_service, fresh_redis, pg_accounts, refresher=False)
    time.sleep(1.5)  # the health verdict is cached for 1 s: the crowd finds it expired
    answers = fire(service.port, [Request(HEALTH)] * 1000, timeout=30)
    assert all(a.status == 200 for a in answers), dict(tally(answers))
    bodies = [validated("health", a.body) for a in answers]
    down = [b for b in bodies if b["redisReady"] is not True]
    statuses = sorted({b["redisStatus"] for b in down})
    assert not down, f"redisReady false {len(down)} times of 1000 ({statuses})"


# == c) no slot leaks after a Redis hang ======================================================


def open_conn(service: Service, key: str) -> StreamConnection:
    """A stream request of ``key`` (any answer)."""
    return StreamConnection(service.port, {"X-API-Key": key}, timeout=20)


def test_slots_do_not_leak_after_a_redis_hang(
    make_service: ServiceFactory, own_redis: RedisServer, pg_accounts: Accounts
) -> None:
    """Figure: a key holds 4 of its 5 streams; Redis hangs (SIGSTOP) for 10 s while 3 more
    opens are tried (admitted per worker or refused; reset at once); after SIGCONT a 5th
    stream is admitted within 5 s (the issue: refused for about 19 s); and 3 s after the
    resume (live streams retry a failed renewal every second) a 6th is refused: the limit
    still counts."""
    # With boards flowing (and re-sent every second while stale) the server notices a
    # closed stream at its next write: a stream the client left does not hold its slot.
    # Own gunicorn and refresher: on the Redis this test hangs.
    service = start_service(make_service, own_redis, pg_accounts, STREAM_MAX_PER_KEY="5")
    assert own_redis.process is not None
    key, key_id = pg_accounts.key, pg_accounts.key_id
    live: list[StreamConnection] = []
    tried: list[str] = []
    try:
        for _ in range(4):
            conn = open_conn(service, key)
            live.append(conn)
            assert conn.status == 200, (conn.status, bytes(conn.body))
        assert wait_until(lambda: len(leases(own_redis.url, key_id)) == 4, timeout=10)

        os.kill(own_redis.process.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        try:
            for _ in range(3):
                attempt = open_conn(service, key)
                tried.append(str(attempt.status))
                attempt.abort()  # a reset: the server's next write to it fails at once
                time.sleep(1.0)
            time.sleep(max(0.0, stopped_at + 10 - time.monotonic()))
        finally:
            os.kill(own_redis.process.pid, signal.SIGCONT)
        resumed_at = time.monotonic()

        # Poll well past the bound, so a failure says how long the slot stayed refused.
        admitted: StreamConnection | None = None
        refusals: list[int] = []
        while admitted is None and time.monotonic() - resumed_at < 40:
            conn = open_conn(service, key)
            if conn.status == 200:
                admitted = conn
                live.append(conn)
            else:
                refusals.append(conn.status)
                conn.abort()
                time.sleep(0.25)
        waited = time.monotonic() - resumed_at
        assert admitted is not None and waited <= 5.0, (
            f"a 5th stream (4 open, limit 5) was refused for {waited:.1f} s after Redis "
            f"resumed ({len(refusals)} refusals: {sorted(set(refusals))}); during the hang "
            f"the opens got {tried}"
        )
        # Live streams whose renewals failed during the hang retry every second: within a
        # few seconds of the resume the limit counts them all again.
        time.sleep(max(0.0, resumed_at + RENEWED_AFTER_S - time.monotonic()))
        held = leases(own_redis.url, key_id)
        sixth = open_conn(service, key)
        sixth.abort()
        now = time.time()
        assert sixth.status == 429, (
            f"a 6th stream was admitted ({sixth.status}) with 5 open and limit 5, "
            f"{time.monotonic() - resumed_at:.1f} s after Redis resumed; leases just before "
            f"(s left): {sorted(round(end - now, 1) for end in held.values())}"
        )
        for conn in live:
            assert not any(isinstance(i, Closed | ResponseEnd) for i in conn.history)
    finally:
        for conn in live:
            conn.close()


# == d) a killed Redis ========================================================================


class GuestPoller:
    """Polls /latest as a guest in a thread; keeps every status (or the error)."""

    def __init__(self, service: Service) -> None:
        """Start polling ``service``'s /latest at once."""
        self.service = service
        self.outcomes: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        """Poll until stopped."""
        while not self._stop.is_set():
            try:
                status, _, _ = http_get(self.service.base + LATEST, timeout=5)
                self.outcomes.append(str(status))
            except OSError as exc:
                self.outcomes.append(type(exc).__name__)
            self._stop.wait(0.05)

    def stop(self) -> list[str]:
        """Stop polling; every outcome."""
        self._stop.set()
        self._thread.join(10)
        return self.outcomes


@pytest.fixture
def poller_factory() -> Iterator[list[GuestPoller]]:
    """Pollers started by a test, stopped after it."""
    pollers: list[GuestPoller] = []
    try:
        yield pollers
    finally:
        for poller in pollers:
            poller.stop()


def ready_streak(service: Service, needed: int, timeout: float) -> float | None:
    """Seconds until ``needed`` health answers in a row say redisReady true (None: never)."""
    started = time.monotonic()
    streak = 0
    while time.monotonic() - started < timeout:
        with contextlib.suppress(OSError):
            status, _, body = http_get(service.base + HEALTH, timeout=2)
            ready = status == 200 and validated("health", body)["redisReady"] is True
            streak = streak + 1 if ready else 0
            if streak >= needed:
                return time.monotonic() - started
        time.sleep(0.1)
    return None


def test_a_killed_redis_fails_open_and_health_recovers_after_its_restart(
    make_service: ServiceFactory,
    own_redis: RedisServer,
    pg_accounts: Accounts,
    poller_factory: list[GuestPoller],
) -> None:
    """Figure: SIGKILL of redis-server under two open streams and a guest polling /latest:
    /latest answers no 5xx (nor fails) throughout, the streams stay open and keep getting
    events, and after Redis restarts on the same port /api/health says redisReady true again
    (10 answers in a row) within 10 s, and the streams get new boards."""
    # Own gunicorn and refresher: on the Redis this test kills.
    service = start_service(make_service, own_redis, pg_accounts)
    assert own_redis.process is not None
    streams = [open_conn(service, pg_accounts.key) for _ in range(2)]
    try:
        last_id = 0
        for conn in streams:
            assert conn.status == 200, (conn.status, bytes(conn.body))
            event, _ = conn.wait_event(15, "the first board", lambda e: e.type == "board")
            last_id = max(last_id, int(event.id))
        poller = GuestPoller(service)
        poller_factory.append(poller)
        time.sleep(1.0)

        os.kill(own_redis.process.pid, signal.SIGKILL)
        own_redis.process.popen.wait(10)
        time.sleep(6.0)  # the board goes stale (3 s): streams re-send it with its age
        for index, conn in enumerate(streams):
            items = conn.drain()
            assert not any(isinstance(i, Closed | ResponseEnd) for i in items), (
                f"stream {index} ended while Redis was down"
            )
            assert any(isinstance(i, Event) for i in items), (
                f"stream {index} got no event in 6 s with Redis down"
            )
        own_redis.stop()  # the killed process's handle
        own_redis.start()  # the same port, empty

        took = ready_streak(service, needed=10, timeout=15)
        assert took is not None and took <= 10.0, (
            f"/api/health did not say redisReady true 10 times in a row within 10 s of the "
            f"restart (took {took})"
        )
        for index, conn in enumerate(streams):
            conn.wait_event(
                30, f"a new board on stream {index}", lambda e: int(e.id or 0) > last_id
            )
        outcomes = poller.stop()
        failures = [o for o in outcomes if not o.isdigit() or int(o) >= 500]
        assert outcomes and not failures, (
            f"/latest while Redis was killed and restarted: {len(failures)} failures "
            f"{sorted(set(failures))} of {len(outcomes)}"
        )
    finally:
        for conn in streams:
            conn.close()
