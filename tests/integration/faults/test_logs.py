"""No key or session token in clear in any log, for real: gunicorn's access and error logs,
the app's lines in them and the refresher's log.

gunicorn runs with its access log on (``GUNICORN_CMD_ARGS="--access-logfile -"``, the default
format: client, Basic-auth user, request line, status, Referer and User-Agent), two gevent
workers, a redis-server and the refresher; accounts are on a PostgreSQL database of this
module's own, made with the documented CLI. Requests carry keys and session tokens where a
mask that needs a word boundary before ``pbk_`` misses them: after ``%20``, a letter or a
digit, inside a word, with the underscore URL-encoded, percent-encoded in part or in whole
(``p%62k_...``, once or twice), in headers the access log prints, in request lines gunicorn
refuses (its "Invalid request from ip=..." line), issued keys on requests that fail, and a
key sent as the ``X-Request-ID`` of requests that log a line of the app.
"""

from __future__ import annotations

import base64
import http.client
import secrets
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import pytest

from harness.accounts import TEST_PEPPER
from harness.processes import RedisServer, Service, wait_until
from tests.support.accounts import AccountsCli, scratch_accounts
from tests.support.contract import validated
from tests.support.encoding import percent_decodings, percent_encoded

LATEST = "/api/probboard/latest"
VERIFY = "/api/keys/verify"
WINDOW = 8  # a run of this many characters of a secret's body counts as a leak
ISSUED_KEYS = ("near-miss", "basic-user", "referer", "request-line")


@dataclass(frozen=True)
class Accounts:
    """A migrated PostgreSQL accounts database, keys and a session token issued by the CLI."""

    cli: AccountsCli
    keys: dict[str, str]
    session: str

    @property
    def env(self) -> dict[str, str]:
        """The environment a service needs for this database."""
        return self.cli.env


@pytest.fixture(scope="module")
def accounts() -> Iterator[Accounts]:
    """A vip_pro account ``alice`` with one key per probe that uses an issued key."""
    with scratch_accounts() as cli:
        cli.create_user("alice", "vip_pro")
        keys = {name: cli.issue_key("alice") for name in ISSUED_KEYS}
        yield Accounts(cli=cli, keys=keys, session=cli.issue_session("alice"))


def body_of(secret: str) -> str:
    """The part of a key or session token after its ``pbk_``/``pbs_`` prefix."""
    return secret[4:]


def leaks(body: str, text: str) -> list[str]:
    """The lines of ``text`` holding any ``WINDOW`` consecutive characters of ``body``, as
    written or percent-decoded up to three times (an encoded key is still the key)."""
    windows = {body[i : i + WINDOW] for i in range(len(body) - WINDOW + 1)}
    return [
        line
        for line in text.splitlines()
        if any(w in view for view in percent_decodings(line) for w in windows)
    ]


def get(port: int, path: str, headers: Mapping[str, str] | None = None) -> int:
    """A GET sent as written (no quoting of ``path``); the status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", path, headers=dict(headers or {}))
        response = connection.getresponse()
        body = response.read()
        if response.status >= 400:
            validated("error", body)
        return response.status
    finally:
        connection.close()


def raw(port: int, data: bytes) -> bytes:
    """``data`` sent as it is on a connection of its own; the answer up to the close."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


@dataclass(frozen=True)
class Probe:
    """One request carrying a secret; ``body`` is the part that must never be logged."""

    name: str
    body: str
    send: Callable[[int], object]


def probes(accounts: Accounts) -> list[Probe]:
    """Every request of the test, each with a secret of its own."""
    found: list[Probe] = []

    def url(name: str, template: str, expected: int = 200) -> None:
        """A request whose URL holds a fresh random body in ``template``'s ``{body}``."""
        body = secrets.token_urlsafe(32)
        path = template.format(body=body, encoded_key=percent_encoded("pbk_" + body))

        def send(port: int) -> None:
            """Send it; the status must be the expected one."""
            assert get(port, path) == expected, (name, path)

        found.append(Probe(name, body, send))

    url("query: Bearer%20pbk_", LATEST + "?auth=Bearer%20pbk_{body}")
    url("query: after a letter (xpbk_)", LATEST + "?token=xpbk_{body}")
    url("query: after a digit (1pbk_)", LATEST + "?k=1pbk_{body}")
    url("query: inside a word (abcpbk_)", LATEST + "?x=abcpbk_{body}")
    url("query: URL-encoded underscore (pbk%5F)", LATEST + "?k=pbk%5F{body}")
    url("query: URL-encoded underscore (pbk%5f)", LATEST + "?k=pbk%5f{body}")
    url("query: session after a letter (xpbs_)", LATEST + "?session=xpbs_{body}")
    url("query: session, URL-encoded underscore (pbs%5F)", LATEST + "?s=pbs%5F{body}")
    url("query: session Bearer%20pbs_", LATEST + "?auth=Bearer%20pbs_{body}")
    url("query: a prefix letter percent-encoded (p%62k_)", LATEST + "?k=p%62k_{body}")
    url("query: the whole prefix percent-encoded", LATEST + "?k=%70%62%6B%5F{body}")
    url("query: prefix and body percent-encoded", LATEST + "?k={encoded_key}")
    url("query: percent-encoded twice (p%2562k_)", LATEST + "?k=p%2562k%255F{body}")
    url("query: session, a prefix letter percent-encoded (p%62s_)", LATEST + "?s=p%62s_{body}")

    def header(name: str, headers: Mapping[str, str], body: str, expected: int) -> None:
        """A request with ``headers``; the access log prints Referer and User-Agent."""

        def send(port: int) -> None:
            """Send it; the status must be the expected one."""
            assert get(port, LATEST if expected == 200 else VERIFY, headers) == expected, name

        found.append(Probe(name, body, send))

    body = secrets.token_urlsafe(32)
    header(
        "Referer: key after a letter",
        {"Referer": f"https://probboard.example/account?key=xpbk_{body}"},
        body,
        200,
    )
    body = secrets.token_urlsafe(32)
    header("User-Agent: key after a digit", {"User-Agent": f"probe/1.0 (1pbk_{body})"}, body, 200)

    # Issued keys (one each) on requests that fail.
    key = accounts.keys["near-miss"]
    near_miss = key[:-1] + ("A" if key[-1] != "A" else "B")
    header("issued key, near miss in X-API-Key (401)", {"X-API-Key": near_miss}, body_of(key), 401)
    key = accounts.keys["basic-user"]
    basic = base64.b64encode(f"x{key}:".encode()).decode()
    header(
        "issued key as the Basic-auth user (401)",
        {"Authorization": f"Basic {basic}"},
        body_of(key),
        401,
    )
    key = accounts.keys["referer"]
    header(
        "issued key in the Referer of a 401",
        {"X-API-Key": well_formed_unknown_key(), "Referer": f"https://x.example/#Bearer%20{key}"},
        body_of(key),
        401,
    )
    header(
        "issued session token in the Referer of a 401",
        {"Referer": f"https://x.example/?s=1{accounts.session}"},
        body_of(accounts.session),
        401,
    )

    def malformed(name: str, line: bytes, body: str) -> None:
        """A request line gunicorn refuses (400) and logs as "Invalid request from ip=..."."""

        def send(port: int) -> None:
            """Send it; gunicorn must refuse it."""
            answer = raw(port, line)
            assert answer.startswith(b"HTTP/1.1 400"), (name, answer[:200])

        found.append(Probe(name, body, send))

    body = secrets.token_urlsafe(32)
    malformed(
        "malformed request line: key after a letter",
        f"GARBAGE {LATEST}?token=xpbk_{body}\r\n\r\n".encode(),
        body,
    )
    key = accounts.keys["request-line"]
    malformed(
        "malformed request line: issued key after Bearer%20",
        f"GARBAGE {VERIFY}?auth=Bearer%20{key}\r\n\r\n".encode(),
        body_of(key),
    )

    key = well_formed_unknown_key()

    def key_as_request_id(port: int) -> None:
        """Failed attempts, each with ``key`` as its request id, until the address is over
        its failed-key limit: the worker logs a line of the app in the request."""
        headers = {"X-Request-ID": key, "X-API-Key": well_formed_unknown_key()}
        statuses = []
        for _ in range(40):
            statuses.append(get(port, VERIFY, headers))
            if statuses[-1] == 429:
                return
        raise AssertionError(f"no 429 after {len(statuses)} failed attempts: {statuses}")

    found.append(
        Probe("X-Request-ID: a key, on requests that log a line", body_of(key), key_as_request_id)
    )
    return found


def well_formed_unknown_key() -> str:
    """A key of the right shape that no account holds."""
    return "pbk_" + secrets.token_urlsafe(32)


def test_no_key_or_session_body_in_clear_in_any_log(
    service: Service, fresh_redis: RedisServer, accounts: Accounts
) -> None:
    """Figure: requests whose key or token body is found in clear in a log = 0 (of 23).

    A body counts as found when any 8 consecutive characters of it are in the gunicorn log
    (access log, error log, app lines) or in the refresher's log, as written or
    percent-decoded.
    """
    service.env.update(
        REDIS_URL=fresh_redis.url,
        DATABASE_URL=accounts.env["DATABASE_URL"],
        API_KEY_PEPPER=TEST_PEPPER,
        GUNICORN_CMD_ARGS="--access-logfile -",
    )
    # Own gunicorn and refresher: the module's one test, with the access log on.
    service.start_web(workers=2)
    service.start_refresher()
    web, refresher = service.web, service.refresher
    assert web is not None and refresher is not None

    def board_served() -> bool:
        """True once the refresher's board reaches the workers."""
        status, _, body = service.get(LATEST)
        return status == 200 and validated("board", body)["updatedAt"] is not None

    assert wait_until(board_served, timeout=30), refresher.output()[-2000:]

    sent = probes(accounts)
    for probe in sent:
        probe.send(service.port)
    marker = f"probe-done-{secrets.token_hex(8)}"
    assert get(service.port, "/api/health", {"User-Agent": marker}) == 200
    assert wait_until(lambda: marker in web.output(), timeout=10), (
        "the access log is not on: " + web.output()[-2000:]
    )
    wait_until(lambda: web.output().count("Invalid request from") >= 2, timeout=5)
    assert "failed key attempts from" in web.output(), web.output()[-2000:]
    logs = {"gunicorn": web.output(), "refresher": refresher.output()}

    found = {
        probe.name: [
            f"{log}: {line[:200]}" for log, text in logs.items() for line in leaks(probe.body, text)
        ]
        for probe in sent
    }
    in_clear = {name: lines for name, lines in found.items() if lines}
    assert len(in_clear) == 0, (
        f"{len(in_clear)} of {len(sent)} requests left their key or token in clear:\n"
        + "\n".join(f"- {name}: {lines[0]}" for name, lines in in_clear.items())
    )
