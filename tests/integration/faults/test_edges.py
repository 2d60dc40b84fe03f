"""Edges of the production shape, for real: gunicorn (gevent workers), redis-server, PostgreSQL.

Each test names the figure it holds. Accounts and keys are made with the documented CLI
commands (``users create``, ``keys create``; in this process: tests/support/accounts.py), on a
PostgreSQL database of this module's own, migrated with ``flask db upgrade``. Every process
is started on 127.0.0.1 and stopped by the pid (or the process group) this module started.
No elapsed time is asserted except where the bound IS the behaviour under test, and those
bounds are generous.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import re
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.accounts import TEST_PEPPER
from harness.processes import (
    ROOT,
    RedisServer,
    Service,
    free_port,
    http_get,
    port_open,
    service_env,
    wait_until,
)
from harness.stream_client import Closed, Event, ResponseEnd, StreamConnection, summarize
from tests.support.accounts import AccountsCli, scratch_accounts
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
VERIFY = "/api/keys/verify"
STREAM_KEYS = ("revoke", "sigterm", "slow")


# -- accounts on PostgreSQL -----------------------------------------------------------------------


@dataclass(frozen=True)
class Accounts:
    """A migrated PostgreSQL accounts database, the CLI's environment and the printed keys."""

    cli: AccountsCli
    keys: dict[str, str]

    @property
    def env(self) -> dict[str, str]:
        """The environment a service needs for this database."""
        return self.cli.env


@pytest.fixture(scope="module")
def accounts() -> Iterator[Accounts]:
    """One vip_pro account ``alice`` with one key per stream test (revoking spends a key)."""
    with scratch_accounts() as cli:
        cli.create_user("alice", "vip_pro")
        yield Accounts(cli=cli, keys={name: cli.issue_key("alice") for name in STREAM_KEYS})


def configure(service: Service, redis_url: str, accounts: Accounts, **settings: str) -> None:
    """Point ``service`` at ``redis_url`` and the accounts database, plus ``settings``."""
    service.env.update(
        REDIS_URL=redis_url,
        DATABASE_URL=accounts.env["DATABASE_URL"],
        API_KEY_PEPPER=TEST_PEPPER,
        **settings,
    )


def web_log(service: Service) -> str:
    """Everything gunicorn (master and workers) wrote so far."""
    assert service.web is not None
    return service.web.output()


def first_board(conn: StreamConnection) -> None:
    """The stream was accepted and its first event is a board."""
    assert conn.status == 200, (conn.status, bytes(conn.body))
    event = conn.next_event(20, "the first board")
    assert event.type == "board", event
    validated("board", event.data)


def well_formed_unknown_key() -> str:
    """A key of the right shape that no account holds."""
    return "pbk_" + secrets.token_urlsafe(32)


# -- a. one refused guest request, one INFO line --------------------------------------------------


def test_a_flood_of_refused_guest_requests_writes_a_handful_of_log_lines(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Figure: at most 10 log lines about refusals for ~2,000 refused guest requests.

    GUEST_RATE_LIMIT="2 per minute"; 4 keep-alive clients from one address send 500 guest
    requests each to /latest: all but 2 are refused (429). A log line per refusal lets any
    one client write the operator's log at its own pace.
    """
    configure(service, fresh_redis.url, accounts, GUEST_RATE_LIMIT="2 per minute")
    # Own gunicorn: its guest limit (2 per minute) and its log are this test's.
    service.start_web(workers=2)
    time.sleep(0.5)  # the workers' start-up lines are written
    before = len(web_log(service))

    def client(_: int) -> list[int]:
        """500 requests on one keep-alive connection; their statuses."""
        connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
        statuses = []
        try:
            for _ in range(500):
                connection.request("GET", LATEST)
                response = connection.getresponse()
                response.read()
                statuses.append(response.status)
        finally:
            connection.close()
        return statuses

    with ThreadPoolExecutor(max_workers=4) as pool:
        statuses = [status for batch in pool.map(client, range(4)) for status in batch]
    refused = statuses.count(429)
    assert refused >= 1990 and set(statuses) <= {200, 429}, (refused, set(statuses))
    time.sleep(1.0)  # lines written after the last answer
    during = web_log(service)[before:]
    about_refusals = [
        line
        for line in during.splitlines()
        if re.search(r"(?i)rate.?limit|exceeded|too many|refus|\b429\b", line)
    ]
    lines = len(about_refusals)
    assert lines <= 10, (
        f"{lines} log lines about refusals for {refused} refused guest "
        f"requests (at most 10 allowed); first ones: {about_refusals[:3]}"
    )


# -- b. the 429 of a blocked address keeps its request id -----------------------------------------


def test_b_429s_of_a_blocked_address_carry_a_real_unique_request_id(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Figure: 429s for a blocked address answered with ``X-Request-ID: -`` = 0.

    AUTH_FAILURE_LIMIT="3 per minute": bad well-formed keys until the address gets 429; then
    every 429 (on both workers: several requests at a time, each on a connection of its own)
    carries a generated, unique request id, and a caller's valid ``X-Request-ID: abc-123``
    is echoed.
    """
    configure(service, fresh_redis.url, accounts, AUTH_FAILURE_LIMIT="3 per minute")
    # Own gunicorn: its failed-key limit (3 per minute) blocks this address.
    service.start_web(workers=2)

    statuses: list[int] = []
    for _ in range(20):
        status, _, body = service.get(VERIFY, {"X-API-Key": well_formed_unknown_key()})
        statuses.append(status)
        validated("error", body)
        if status == 429:
            break
    assert statuses[-1] == 429, f"never blocked: {statuses}"

    def refused(headers: Mapping[str, str]) -> tuple[int, dict[str, str]]:
        """One request on a fresh connection: its status and headers (names lower-cased)."""
        status, answer, body = service.get(VERIFY, headers)
        validated("error", body)
        return status, {name.lower(): value for name, value in answer.items()}

    attempts = [{"X-API-Key": well_formed_unknown_key()} for _ in range(24)]
    with ThreadPoolExecutor(max_workers=4) as pool:  # several at a time: both workers answer
        replies = list(pool.map(refused, attempts))
    assert [status for status, _ in replies] == [429] * len(replies), replies
    ids = [headers.get("x-request-id") for _, headers in replies]
    dashes = ids.count("-")
    assert dashes == 0, f"{dashes} of {len(ids)} 429s carry 'X-Request-ID: -': {ids}"
    assert all(ids), ids
    assert len(set(ids)) == len(ids), f"request ids repeat: {ids}"

    echoed = [
        refused({"X-API-Key": well_formed_unknown_key(), "X-Request-ID": "abc-123"})
        for _ in range(6)
    ]
    assert [status for status, _ in echoed] == [429] * len(echoed), echoed
    assert [headers.get("x-request-id") for _, headers in echoed] == ["abc-123"] * 6, echoed


# -- c. an ended stream's connection closes at once -----------------------------------------------


def test_c_the_socket_of_a_stream_ended_by_the_server_closes_within_2_s(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Figure: seconds from a stream's last chunk to the server's close: at most 2.

    A revoked key's stream is ended by the server (``event: error``, then the last chunk).
    Nothing follows a stream on its connection, so the server must close it then, not hold
    it for gunicorn's keep-alive (5 s) as if another request could come.
    """
    configure(service, fresh_redis.url, accounts)
    # Own gunicorn and refresher: the module's shared gunicorn runs no refresher.
    service.start_web(workers=2)
    service.start_refresher()
    key = accounts.keys["revoke"]
    with StreamConnection(service.port, {"X-API-Key": key}, timeout=30) as conn:
        first_board(conn)
        accounts.cli.run("keys", "revoke", key)
        # The stream re-checks its key every 10 s.
        error, _ = conn.wait_event(30, "the error ending the stream", lambda e: e.type != "board")
        assert error.type == "error", error
        validated("error", error.data)
        conn.wait_for(lambda i: isinstance(i, ResponseEnd), 10, "the last chunk")
        ended = time.monotonic()
        closed, between = conn.wait_for(lambda i: isinstance(i, Closed), 15, "the server's close")
        open_for = time.monotonic() - ended
    assert isinstance(closed, Closed), closed
    assert not [i for i in between if isinstance(i, Event)], summarize(between)
    assert open_for <= 2.0, (
        f"the server held the connection {open_for:.1f} s after the stream's last chunk "
        f"(response headers: {conn.headers})"
    )


def test_c_sigterm_with_3_open_streams_closes_them_and_exits_within_8_s(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Figure: seconds from SIGTERM to each stream's EOF (at most 3) and to gunicorn's exit
    (at most 8).

    The streams end with a goodbye at once; their sockets must close then, not after the
    5 s keep-alive a finished response gets, and the workers must not wait on them.
    """
    configure(service, fresh_redis.url, accounts, STREAM_MAX_PER_KEY="4")
    # Own gunicorn and refresher: the test SIGTERMs gunicorn.
    service.start_web(workers=2)
    service.start_refresher()
    web = service.web
    assert web is not None
    key = accounts.keys["sigterm"]
    conns = [StreamConnection(service.port, {"X-API-Key": key}, timeout=30) for _ in range(3)]
    try:
        for conn in conns:
            first_board(conn)
        web.signal(signal.SIGTERM)
        signalled = time.monotonic()
        deadline = signalled + 8.0
        eof_after: list[float] = []
        for conn in conns:
            closed, _ = conn.wait_for(lambda i: isinstance(i, Closed), 8, "EOF after SIGTERM")
            assert isinstance(closed, Closed) and closed.error is None, closed
            eof_after.append(round(time.monotonic() - signalled, 1))
        assert max(eof_after) <= 3.0, f"streams saw EOF {eof_after} s after SIGTERM"
        try:
            code = web.popen.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            code = None
        exited_after = time.monotonic() - signalled
        assert code is not None, (
            f"gunicorn still runs 8 s after SIGTERM (streams saw EOF after {eof_after} s)"
        )
        assert code == 0, web.output()[-3000:]
        assert exited_after <= 8.0, exited_after
    finally:
        for conn in conns:
            conn.close()


# -- d. a dropped slow reader is not an error -----------------------------------------------------


def server_side_established(service_port: int, client_port: int) -> bool:
    """True while the server's end of the client's connection is ESTABLISHED (/proc/net/tcp)."""
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, remote = int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16)
        if local == service_port and remote == client_port and fields[3] == "01":
            return True
    return False


def test_d_dropping_a_stalled_stream_reader_logs_no_traceback(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Figure: tracebacks / error lines logged for a dropped slow reader = 0.

    STREAM_WRITE_TIMEOUT_S=1, the refresher running, a client with a tiny receive buffer
    that reads nothing after the headers. Dropping it is the service working as designed:
    no "Traceback", no "Error handling request", no "Socket error processing request".
    Boards come every 100 ms (REFRESH_TICK_MS) rather than 500: the buffers between server
    and client (a 32 KB send buffer, doubled by Linux) fill in ~10 s instead of ~40 s.
    """
    configure(service, fresh_redis.url, accounts, STREAM_WRITE_TIMEOUT_S="1", REFRESH_TICK_MS="100")
    # Own gunicorn and refresher: a 1 s write timeout and 100 ms ticks.
    service.start_web(workers=2)
    service.start_refresher()
    key = accounts.keys["slow"]
    slow = StreamConnection(service.port, {"X-API-Key": key}, read=False, rcvbuf=4096)
    try:
        assert slow.status == 200, (slow.status, bytes(slow.body))
        assert server_side_established(service.port, slow.local_port)
        dropped = wait_until(
            lambda: not server_side_established(service.port, slow.local_port),
            timeout=45,
            interval=0.25,
        )
        time.sleep(1.5)  # whatever the drop logs is written
        log = web_log(service)
    finally:
        slow.close()
    assert dropped, "the server never dropped a client that read nothing for 45 s"
    problems = [
        line
        for line in log.splitlines()
        if re.search(r"Traceback|Error handling request|Socket error processing request", line)
    ]
    assert not problems, (
        f"dropping a stalled reader (dropped: {dropped}) logged {len(problems)} error lines: "
        f"{problems[:4]}\n{log[-4000:]}"
    )


# -- e. errors gunicorn answers itself ------------------------------------------------------------


@pytest.fixture(scope="module")
def plain_service(
    tmp_path_factory: pytest.TempPathFactory, redis_server: RedisServer, accounts: Accounts
) -> Iterator[Service]:
    """gunicorn with two gevent workers and no refresher, for requests it refuses itself."""
    service = Service(tmp_path_factory.mktemp("edges-plain"), service_env())
    try:
        configure(service, redis_server.url, accounts)
        service.start_web(workers=2)
        yield service
    finally:
        service.stop()


def raw_exchange(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` bytes as they are; the answer's status, headers and body (to EOF)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(status_line.split(" ")[1]), headers, body


HOST = b"Host: 127.0.0.1\r\n"
REFUSED_BY_GUNICORN: dict[str, tuple[bytes, int]] = {
    "malformed-request-line": (b"GARBAGE\r\n\r\n", 400),
    "request-line-over-4094-bytes": (
        b"GET " + LATEST.encode() + b"?pad=" + b"a" * 5000 + b" HTTP/1.1\r\n" + HOST + b"\r\n",
        414,
    ),
    "header-over-8190-bytes": (
        b"GET " + LATEST.encode() + b" HTTP/1.1\r\n" + HOST
        + b"X-Pad: " + b"b" * 9000 + b"\r\n\r\n",
        431,
    ),
    "over-100-headers": (
        b"GET " + LATEST.encode() + b" HTTP/1.1\r\n" + HOST
        + b"".join(b"X-Pad-%d: v\r\n" % i for i in range(120)) + b"\r\n",
        431,
    ),
}  # fmt: skip


@pytest.mark.parametrize("case", list(REFUSED_BY_GUNICORN))
def test_e_requests_gunicorn_refuses_get_a_json_error_response(
    plain_service: Service, case: str
) -> None:
    """Figure: refusals by gunicorn answered with something else than an ErrorResponse = 0.

    Every error leaves the service as ``{"ok": false, "code": ..., "error": ...}`` with
    ``Content-Type: application/json``, those gunicorn answers before the app sees the
    request included (not gunicorn's HTML page).
    """
    request, expected = REFUSED_BY_GUNICORN[case]
    status, headers, body = raw_exchange(plain_service.port, request)
    assert status == expected, (status, headers, body[:300])
    content_type = headers.get("content-type", "")
    assert content_type.split(";")[0].strip() == "application/json", (
        f"{status} answered with Content-Type {content_type!r}: {body[:300]!r}"
    )
    document = validated("error", body)
    assert document["ok"] is False, document
    assert isinstance(document.get("code"), str) and document["code"], document
    assert isinstance(document["error"], str) and document["error"], document


# -- f. `make run` on a public address ------------------------------------------------------------


@dataclass
class MakeRun:
    """``make run`` started in a session of its own; its output and whether the port opened."""

    popen: subprocess.Popen[bytes]
    log_path: Path
    port: int
    listened: bool = False

    def output(self) -> str:
        """Everything ``make run`` wrote so far."""
        return self.log_path.read_text(errors="replace")


def make_run_env(tmp_path: Path, host: str, port: int) -> dict[str, str]:
    """The environment of ``make run``: embedded shape (no REDIS_URL), a scratch database."""
    env = service_env(HOST=host, PORT=str(port), DATABASE_URL=f"sqlite:///{tmp_path / 'run.db'}")
    for name in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS", "GUEST_RATE_LIMIT"):
        env.pop(name, None)
    return env


@contextlib.contextmanager
def make_run(tmp_path: Path, host: str, timeout: float = 60.0) -> Iterator[MakeRun]:
    """Run ``make run`` until it exits, its port opens or ``timeout`` passes; stop it after."""
    port = free_port()
    log_path = tmp_path / f"make-run-{host}.log"
    with open(log_path, "wb") as log:
        # -o: never rebuild the venv here (a test must not install packages).
        popen = subprocess.Popen(
            ["make", "-o", ".venv/bin/activate", "run"],
            cwd=ROOT,
            env=make_run_env(tmp_path, host, port),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    run = MakeRun(popen, log_path, port)
    try:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and popen.poll() is None:
            if port_open(port):
                run.listened = True
                break
            time.sleep(0.05)
        yield run
    finally:
        stop_group(popen)


def stop_group(popen: subprocess.Popen[bytes]) -> None:
    """SIGTERM the process group this test started (its pid is the group id), then SIGKILL."""
    if popen.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, signal.SIGTERM)
        try:
            popen.wait(10)
            return
        except subprocess.TimeoutExpired:
            pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(popen.pid, signal.SIGKILL)  # children left in the group
    with contextlib.suppress(subprocess.TimeoutExpired):
        popen.wait(5)


def test_f_make_run_refuses_to_expose_the_development_server(tmp_path: Path) -> None:
    """Figure: ports opened by ``HOST=0.0.0.0 make run`` (development server) = 0.

    The embedded shape is ``flask run``, a development server: beyond loopback the service
    must refuse to start, exit non-zero and point at the production shape.
    """
    with make_run(tmp_path, "0.0.0.0") as run:
        listened, code = run.listened, run.popen.poll()
        output = run.output()
    assert not listened, f"HOST=0.0.0.0 make run listens on :{run.port}:\n{output[-2000:]}"
    assert code is not None, f"HOST=0.0.0.0 make run neither exited nor listened:\n{output}"
    assert code != 0, output
    assert re.search(r"REDIS_URL|gunicorn", output), (
        f"the refusal does not point at the production shape:\n{output[-2000:]}"
    )


def test_f_make_run_on_loopback_still_starts(tmp_path: Path) -> None:
    """Figure: ``HOST=127.0.0.1 make run`` opens its port within 60 s (1 of 1)."""
    with make_run(tmp_path, "127.0.0.1") as run:
        listened = run.listened
        if listened:
            status, _, body = http_get(f"http://127.0.0.1:{run.port}/api/health")
            assert status == 200, body
            validated("health", body)
        output = run.output()
    assert listened, f"HOST=127.0.0.1 make run did not open :{run.port}:\n{output[-2000:]}"
