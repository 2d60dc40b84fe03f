"""Account limits (app/limits/per_account.py) on a real Redis, as two workers see them.

Two ``AccountLimits`` with storages of their own stand for two gunicorn workers sharing one
Redis. The promise: never more than the limit in a window, whichever worker serves, exact
for a caller at an ordinary pace, and few round trips for a caller sending many requests.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from limits import parse_many
from limits.storage import MemoryStorage

from app.errors import ApiError
from app.limits.fallback_storage import FailoverStorage
from app.limits.per_account import AccountLimits, Quota
from harness.processes import RedisServer

PLAN = "vip_pro"


def worker(url: str, limit: str, workers: int = 2) -> AccountLimits:
    storage = FailoverStorage("probboard+" + url, socket_timeout=2)
    return AccountLimits(storage, {PLAN: list(parse_many(limit))}, workers, key_prefix="t")


def admitted(limits: AccountLimits, account: int = 1) -> Quota | ApiError:
    try:
        quota = limits.admit(account, PLAN)
    except ApiError as error:
        return error
    assert quota is not None
    return quota


def evalsha_calls(client: redis.Redis) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


@pytest.fixture
def client(fresh_redis: RedisServer) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(fresh_redis.url)
    yield connection
    connection.close()


def test_two_workers_taking_turns_admit_exactly_the_limit(fresh_redis: RedisServer) -> None:
    first, second = worker(fresh_redis.url, "7 per minute"), worker(fresh_redis.url, "7 per minute")

    answers = [admitted(first if n % 2 else second) for n in range(7)]
    refused = [admitted(first), admitted(second)]

    assert all(isinstance(a, Quota) for a in answers), answers
    remaining = [a.remaining for a in answers if isinstance(a, Quota)]
    assert remaining == [6, 5, 4, 3, 2, 1, 0]
    for error in refused:
        assert isinstance(error, ApiError) and error.status == 429 and error.code == "rate_limited"
        assert error.retry_after_ms is not None and 1 <= error.retry_after_ms <= 60_000
    # Another account has its own count.
    assert isinstance(admitted(first, account=2), Quota)


def test_a_flood_on_two_workers_never_gets_past_the_limit(
    fresh_redis: RedisServer, client: redis.Redis
) -> None:
    workers = [worker(fresh_redis.url, "300 per minute") for _ in range(2)]
    start = threading.Barrier(12)

    def flood(n: int) -> int:
        limits = workers[n % 2]
        start.wait()
        served = 0
        for _ in range(100):
            if isinstance(admitted(limits), Quota):
                served += 1
        return served

    with ThreadPoolExecutor(max_workers=12) as pool:
        served = sum(pool.map(flood, range(12)))

    counted = sum(int(client.get(key) or 0) for key in client.keys("*account:1*"))
    assert served <= 300
    assert counted >= served  # every slot served was counted in Redis first
    # Reserved slots can go unused when the flood is refused, but not most of them.
    assert served >= 200, served


def test_a_fast_caller_takes_its_slots_several_per_round_trip(
    fresh_redis: RedisServer, client: redis.Redis
) -> None:
    limits = worker(fresh_redis.url, "1000000 per minute", workers=1)
    before = evalsha_calls(client)

    # Its pace is unknown for its first PACE_S (0.1 s: a round trip each, at most a few
    # thousand); after that, slots come several per round trip.
    answers = [admitted(limits) for _ in range(30_000)]

    assert all(isinstance(a, Quota) for a in answers)
    round_trips = evalsha_calls(client) - before
    assert round_trips < 30_000 / 4, round_trips
    counted = sum(int(client.get(key) or 0) for key in client.keys("*account:1*"))
    assert counted >= 30_000  # served slots were all counted (and some reserved ahead)


def test_a_caller_at_an_ordinary_pace_is_counted_request_by_request(
    fresh_redis: RedisServer, client: redis.Redis
) -> None:
    limits = worker(fresh_redis.url, "240 per minute")
    before = evalsha_calls(client)
    for n in range(5):
        quota = admitted(limits)
        assert isinstance(quota, Quota) and quota.remaining == 239 - n
        threading.Event().wait(0.25)  # vip_pro polls every 500 ms; twice as fast here

    assert evalsha_calls(client) - before == 5
    counted = sum(int(client.get(key) or 0) for key in client.keys("*account:1*"))
    assert counted == 5


def test_a_plan_without_a_limit_is_not_counted() -> None:
    limits = AccountLimits(MemoryStorage(), {PLAN: list(parse_many("1 per minute"))}, 1, "t")
    assert limits.admit(1, "admin") is None
    assert limits.admit(1, "admin") is None
    assert isinstance(limits.admit(1, PLAN), Quota)
    with pytest.raises(ApiError):
        limits.admit(1, PLAN)


def test_every_limit_of_a_plan_holds(fresh_redis: RedisServer) -> None:
    limits = worker(fresh_redis.url, "100 per minute; 3 per second")
    answers = [admitted(limits) for _ in range(4)]

    assert [isinstance(a, Quota) for a in answers] == [True, True, True, False]
    refused = answers[3]
    assert isinstance(refused, ApiError)
    assert refused.retry_after_ms is not None and refused.retry_after_ms <= 1000
    assert "3 per 1 second" in refused.message
