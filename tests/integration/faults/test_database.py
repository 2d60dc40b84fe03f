"""Fault suite, the database (issue 15): "A hung database hangs every keyed request".

Real processes only: gunicorn with two gevent workers, a real redis-server, the refresher
when boards are needed, and a scratch PostgreSQL database reached through a pausable TCP
proxy (``harness/proxy.py``). ``pause()`` is a hung database: connections are
accepted and kept, the kernel ACKs, and nothing comes back. ``refuse()`` with ``close()``
is a database that is gone. Keys are re-read from the database on every request
(``AUTH_CACHE_MS=0``), so each keyed request really asks it.

The bounds below are the behaviour under test (seconds, generous); nothing else is timed.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Sequence

from harness.processes import RedisServer, Service, wait_until
from harness.proxy import TcpProxy
from harness.stream_client import Closed, Comment, Event, ResponseEnd, StreamConnection
from tests.integration.faults.conftest import (
    Accounts,
    ServiceFactory,
    leases,
    through,
)
from tests.integration.faults.conftest import start_service as serve
from tests.support.contract import validated
from tests.support.crowd import Answer, Request, fire, tally

VERIFY = "/api/keys/verify"
LATEST = "/api/probboard/latest"
CROWD = 21  # more than SQLAlchemy's pool (5 + 10 overflow) per worker holds
ANSWER_WITHIN_S = 2.0  # the figure: a keyed request answers within this while the store hangs
BOUND_S = 2.5  # each request's own timeout (the figure plus delivery slack)
PAUSE_S = 45.0  # how long stream housekeeping is watched with the database hung
EXIT_WITHIN_S = 15.0  # gunicorn's graceful_timeout is 10 s


def start_service(
    make_service: ServiceFactory,
    redis_server: RedisServer,
    accounts: Accounts,
    proxy: TcpProxy,
    refresher: bool = False,
    **settings: str,
) -> Service:
    """gunicorn (2 gevent workers) on ``redis_server``, its database behind ``proxy``."""
    database_url = through(accounts.database_url, proxy)
    return serve(make_service, redis_server, database_url, refresher, AUTH_CACHE_MS="0", **settings)


def verified(service: Service, key: str) -> bool:
    """True when ``key`` verifies (200) right now."""
    status, _, _ = service.get(VERIFY, {"X-API-Key": key})
    return status == 200


def warm_up(service: Service, key: str) -> None:
    """A few verifications, so both workers hold database connections before the fault."""
    for _ in range(10):
        status, _, body = service.get(VERIFY, {"X-API-Key": key})
        assert status == 200, body


def describe(answers: Sequence[Answer]) -> str:
    """Outcomes and answer times, for assertion messages."""
    times = sorted(round(a.seconds, 2) for a in answers if a.seconds is not None)
    return f"outcomes {dict(tally(answers))}, answer times {times}"


def check_unavailable(answers: Sequence[Answer]) -> None:
    """Every answer is a 503 auth_unavailable ErrorResponse with Retry-After, in time."""
    for answer in answers:
        assert answer.status == 503 and answer.code == "auth_unavailable", describe(answers)
        assert "retry-after" in answer.headers, answer.headers
        validated("error", answer.body)
        assert answer.seconds is not None and answer.seconds <= BOUND_S, describe(answers)


def test_a_hung_database_answers_keyed_requests_503_within_2s_and_guests_are_served(
    make_service: ServiceFactory,
    fresh_redis: RedisServer,
    pg_accounts: Accounts,
    pg_proxy: TcpProxy,
) -> None:
    """Figure: with the database hung, each of 21 simultaneous /api/keys/verify answers 503
    auth_unavailable with Retry-After within 2 s (each bounded at 2.5 s), guests' /latest
    answer 200 meanwhile, and the key verifies again (200) once the database answers.
    (The issue: no answer in 58 s, or a 503 after 30 s.)"""
    # Own gunicorn and refresher: their database is behind this test's proxy.
    service = start_service(make_service, fresh_redis, pg_accounts, pg_proxy, refresher=True)
    warm_up(service, pg_accounts.key)

    keyed = Request(VERIFY, {"X-API-Key": pg_accounts.key})
    guest = Request(LATEST)
    pg_proxy.pause()
    try:
        answers = fire(service.port, [keyed] * CROWD + [guest] * 10, timeout=BOUND_S)
        # Guests once more, with the keyed requests of the crowd over: still served.
        guests_after = fire(service.port, [guest] * 5, timeout=BOUND_S)
    finally:
        pg_proxy.resume()

    keyed_answers, guest_answers = answers[:CROWD], answers[CROWD:] + guests_after
    for answer in guest_answers:
        assert answer.status == 200, f"guests while the database hangs: {describe(guest_answers)}"
        validated("board", answer.body)
    check_unavailable(keyed_answers)
    assert wait_until(lambda: verified(service, pg_accounts.key), timeout=15), (
        "the key does not verify again after the database came back"
    )


def test_a_refused_database_answers_keyed_requests_503_at_once(
    make_service: ServiceFactory,
    fresh_redis: RedisServer,
    pg_accounts: Accounts,
    pg_proxy: TcpProxy,
) -> None:
    """Figure: with the database refusing connections (and its open connections reset), each
    of 21 simultaneous /api/keys/verify answers 503 auth_unavailable with Retry-After within
    2 s; once it accepts again the key verifies (200)."""
    # Own gunicorn: its database is behind this test's proxy.
    service = start_service(make_service, fresh_redis, pg_accounts, pg_proxy)
    warm_up(service, pg_accounts.key)

    pg_proxy.refuse()
    pg_proxy.close()
    try:
        answers = fire(service.port, [Request(VERIFY, {"X-API-Key": pg_accounts.key})] * CROWD, 2.0)
    finally:
        pg_proxy.accept_again()

    check_unavailable(answers)
    assert all(a.seconds is not None and a.seconds <= 2.0 for a in answers), describe(answers)
    assert wait_until(lambda: verified(service, pg_accounts.key), timeout=15), (
        "the key does not verify again after the database came back"
    )


def boards_in(conn: StreamConnection) -> tuple[int, bool]:
    """Board events read since the last call, and whether the stream ended meanwhile."""
    items = conn.drain()
    ended = any(isinstance(i, Closed | ResponseEnd) for i in items)
    boards = sum(1 for i in items if isinstance(i, Event) and i.type == "board")
    return boards, ended


def test_stream_housekeeping_never_waits_on_a_hung_database(
    make_service: ServiceFactory,
    fresh_redis: RedisServer,
    pg_accounts: Accounts,
    pg_proxy: TcpProxy,
) -> None:
    """Figure: with the database hung for 45 s under two open streams of a vip_pro key
    (their keys re-checked every 10 s), the streams' leases in Redis stay in the future and
    are renewed, the streams keep receiving boards, and SIGTERM still ends each stream with
    its final comment (or EOF) and gunicorn within 15 s. (The issue: the ticker blocks on
    the key re-check, leases lapse after about 40 s, SIGTERM does not end streams.)"""
    # Own gunicorn and refresher: behind this test's proxy; the test SIGTERMs it.
    service = start_service(
        make_service, fresh_redis, pg_accounts, pg_proxy, refresher=True, STREAM_MAX_PER_KEY="2"
    )
    assert service.web is not None
    headers = {"X-API-Key": pg_accounts.key}
    streams = [StreamConnection(service.port, headers) for _ in range(2)]
    try:
        for conn in streams:
            assert conn.status == 200, (conn.status, bytes(conn.body))
            conn.wait_event(15, "the first board", lambda e: e.type == "board")
        assert wait_until(lambda: len(leases(fresh_redis.url, pg_accounts.key_id)) == 2, 10)
        first = leases(fresh_redis.url, pg_accounts.key_id)

        pg_proxy.pause()
        paused_at = time.monotonic()
        last_board = [paused_at] * len(streams)
        renewed = False
        while time.monotonic() - paused_at < PAUSE_S:
            time.sleep(1.0)
            now, held = time.time(), leases(fresh_redis.url, pg_accounts.key_id)
            into = time.monotonic() - paused_at
            assert len(held) == 2 and min(held.values()) > now, (
                f"{into:.0f} s into the database hang the key's leases are "
                f"{ {c: round(end - now, 1) for c, end in held.items()} } s from their end "
                f"(2 live streams hold them)"
            )
            renewed = renewed or any(held.get(c, 0) > end for c, end in first.items())
            for index, conn in enumerate(streams):
                boards, ended = boards_in(conn)
                assert not ended, f"stream {index} ended {into:.0f} s into the database hang"
                if boards:
                    last_board[index] = time.monotonic()
                assert time.monotonic() - last_board[index] < 5, (
                    f"stream {index} got no board for 5 s, {into:.0f} s into the hang"
                )
        assert renewed, f"no lease was renewed in {PAUSE_S:.0f} s: {first} -> {held}"

        # Still hung: SIGTERM must end every stream and gunicorn.
        service.web.signal(signal.SIGTERM)
        deadline = time.monotonic() + EXIT_WITHIN_S
        for index, conn in enumerate(streams):
            conn.wait_for(
                lambda i: (
                    isinstance(i, Closed | ResponseEnd)
                    or (isinstance(i, Comment) and "shutting down" in i.text)
                ),
                max(0.1, deadline - time.monotonic()),
                f"stream {index}'s final comment or EOF after SIGTERM",
            )
        try:
            code = service.web.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"gunicorn still runs {EXIT_WITHIN_S:.0f} s after SIGTERM"
            ) from None
        assert code == 0, service.web.output()[-3000:]
    finally:
        for conn in streams:
            conn.close()
        pg_proxy.resume()
