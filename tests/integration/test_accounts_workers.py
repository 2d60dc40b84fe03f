"""The production shape on PostgreSQL: revocation and downgrade reach every gunicorn worker.

gunicorn runs two gevent workers on Redis and PostgreSQL; accounts and keys are made with
the documented CLI as its own process. gunicorn's access log (pid, status, request id) shows
which worker answered each request, so "every worker" is checked, not assumed.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import count
from typing import Any

import psycopg
import pytest

from harness.databases import empty_tables
from harness.processes import RedisServer, Service, flask_cli, wait_until
from tests.conftest import TEST_PEPPER
from tests.support.contract import validated

VERIFY = "/api/keys/verify"
LATEST = "/api/probboard/latest"
KEY = re.compile(r"^pbk_[A-Za-z0-9_-]{43}$")
ISO_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
ACCESS_FORMAT = "pbaccess %(p)s %(s)s %({x-request-id}i)s"
ACCESS_LINE = re.compile(r"^pbaccess <(\d+)> (\d{3}) (\S+)$", re.MULTILINE)
BATCH = 20
SPREAD_ATTEMPTS = 30
_ids = count()


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]
    pid: int


@pytest.fixture
def pg_url(postgres_database: str) -> Iterator[str]:
    """The session's PostgreSQL database, emptied before and after this test."""
    empty_tables(postgres_database)
    try:
        yield postgres_database
    finally:
        empty_tables(postgres_database)


def batch(service: Service, path: str, key: str, n: int = BATCH) -> list[Answer]:
    """``n`` requests on fresh connections, 8 at a time; each with the pid that served it."""
    phase = f"b{next(_ids)}"
    ids = [f"{phase}-{i}" for i in range(n)]

    def one(request_id: str) -> tuple[int, bytes]:
        status, headers, body = service.get(path, {"X-API-Key": key, "X-Request-ID": request_id})
        assert headers["X-Request-ID"] == request_id
        assert key not in body.decode() and key not in json.dumps(headers)
        return status, body

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, ids))
    assert service.web is not None
    web = service.web

    def served() -> dict[str, int]:
        found = {m[3]: int(m[1]) for m in ACCESS_LINE.finditer(web.output())}
        return {request_id: found[request_id] for request_id in ids if request_id in found}

    assert wait_until(lambda: len(served()) == n, timeout=5), web.output()[-2000:]
    pids = served()
    answers = []
    for request_id, (status, body) in zip(ids, results, strict=True):
        document = json.loads(body)
        assert isinstance(document, dict)
        answers.append(Answer(status, document, pids[request_id]))
    return answers


def spread(service: Service, path: str, key: str) -> list[Answer]:
    """A batch (or a few) whose requests were served by both workers."""
    answers = batch(service, path, key)
    # Which worker accepts a connection is the kernel's choice: an idle worker may take a
    # whole batch. Batches are cheap; try until both have answered (almost always 1 or 2).
    for _ in range(SPREAD_ATTEMPTS):
        if len({a.pid for a in answers}) == 2:
            break
        answers += batch(service, path, key)
    assert len({a.pid for a in answers}) == 2, "requests never reached both workers"
    return answers


def check_verified(answer: Answer, key: str, plan: str, first_use: bool = False) -> None:
    """A 200 KeyVerificationResponse of alice's ``key`` under ``plan``.

    ``lastUsedAt`` is a time, except on a worker's first use of the key (``first_use``),
    which may have nothing before it.
    """
    assert answer.status == 200, answer
    body = answer.body
    assert set(body) == {"ok", "userId", "plan", "maskedKey", "lastUsedAt"}, body
    assert (body["ok"], body["userId"], body["plan"]) == (True, "alice", plan)
    masked = body["maskedKey"]
    assert isinstance(masked, str) and masked == f"{key[:12]}...{key[-4:]}"
    if not (first_use and body["lastUsedAt"] is None):
        assert isinstance(body["lastUsedAt"], str), body
        assert ISO_Z.fullmatch(body["lastUsedAt"]), body


def check_first_uses(answers: list[Answer], key: str) -> None:
    """The first requests of a new key: only a worker's first may lack ``lastUsedAt``."""
    for answer in answers:
        check_verified(answer, key, "vip_pro", first_use=True)
    without = Counter(a.pid for a in answers if a.body["lastUsedAt"] is None)
    # A worker remembers each use it served: after its first, there is always a previous one.
    assert all(n == 1 for n in without.values()), without


def all_refused(service: Service, key: str) -> bool:
    return all(a.status == 401 for a in batch(service, VERIFY, key))


def all_on_plan(service: Service, key: str, plan: str) -> bool:
    return all(a.status == 200 and a.body["plan"] == plan for a in batch(service, VERIFY, key))


def last_used(url: str) -> dict[str, Any]:
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        return {
            prefix + "..." + last4: used
            for prefix, last4, used in conn.execute(
                "SELECT prefix, last4, last_used_at FROM api_keys"
            )
        }


def test_revocation_and_downgrade_reach_every_gunicorn_worker(
    pg_url: str, fresh_redis: RedisServer, service: Service
) -> None:
    """A CLI revocation and a CLI downgrade reach both gunicorn workers within the cache time."""
    service.env.update(
        REDIS_URL=fresh_redis.url,
        DATABASE_URL=pg_url,
        API_KEY_PEPPER=TEST_PEPPER,
        AUTH_FAILURE_LIMIT="100000 per minute",  # the polling below fails on purpose
        VERIFY_RATE_LIMIT="100000 per minute",  # and polls one account's keys many times
        GUNICORN_CMD_ARGS=f"--access-logfile - --access-logformat '{ACCESS_FORMAT}'",
    )
    assert flask_cli(service.env, "users", "create", "alice", "--plan", "vip_pro") == (
        "created account alice (plan vip_pro)\n"
    )
    revoked = flask_cli(service.env, "keys", "create", "alice").splitlines()[-1]
    kept = flask_cli(service.env, "keys", "create", "alice").splitlines()[-1]
    assert KEY.fullmatch(revoked) and KEY.fullmatch(kept) and revoked != kept

    # Own gunicorn: the test stops it to see its workers write the key uses.
    service.start_web(workers=2)
    # Both workers know (and have cached) both keys.
    for key in (revoked, kept):
        check_first_uses(spread(service, VERIFY, key), key)

    # Revoke with the CLI: every worker refuses the key within the cache time.
    assert flask_cli(service.env, "keys", "revoke", revoked).startswith("revoked key 1 ")
    assert wait_until(lambda: all_refused(service, revoked), timeout=8, interval=0.1)
    after_revoke = spread(service, VERIFY, revoked)
    assert len(after_revoke) >= BATCH
    for answer in after_revoke:
        assert answer.status == 401, answer
        assert validated("error", json.dumps(answer.body)) == {
            "ok": False,
            "code": "invalid_key",
            "error": "The API key is not valid.",
        }
    # The other key of the same account is untouched.
    for answer in spread(service, VERIFY, kept):
        check_verified(answer, kept, "vip_pro")

    # Downgrade with the CLI: every worker serves the key under plan user.
    flask_cli(service.env, "users", "set-plan", "alice", "user")
    assert wait_until(lambda: all_on_plan(service, kept, "user"), timeout=8, interval=0.1)
    for answer in spread(service, VERIFY, kept):
        check_verified(answer, kept, "user")
    for answer in spread(service, LATEST, kept):
        assert answer.status == 200, answer
        board = validated("board", json.dumps(answer.body))
        assert (board["plan"], board["planLabel"], board["refreshMs"]) == ("user", "User", 2000)

    # Workers write their coalesced key uses when they exit.
    service.stop()
    used = last_used(pg_url)
    assert used[f"{kept[:12]}...{kept[-4:]}"] is not None, used
    assert used[f"{revoked[:12]}...{revoked[-4:]}"] is not None, used
    assert service.web is not None
    log = service.web.output()
    for key in (revoked, kept):
        assert key not in log and key[4:] not in log
