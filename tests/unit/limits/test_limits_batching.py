"""ScriptBatcher against a real Redis: every caller gets its own answer, whatever happens.

Concurrent callers (threads here; greenlets under gunicorn) share pipelines; these tests
check what a caller can see: its own reply, its own error, the same behaviour after Redis
lost the script, and an error for every caller when Redis is gone.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
import redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from app.limits.batching import ScriptBatcher
from harness.processes import RedisServer

# Adds ARGV[1] to KEYS[1] and answers {the new value, ARGV[2]}: each caller can recognise
# its own reply, and the sum shows every call ran exactly once.
SCRIPT = """
local total = redis.call('incrby', KEYS[1], tonumber(ARGV[1]))
return {total, ARGV[2]}
"""


@pytest.fixture
def client(fresh_redis: RedisServer) -> Iterator[redis.Redis]:
    connection = redis.Redis.from_url(fresh_redis.url, socket_timeout=2)
    yield connection
    connection.close()


def test_concurrent_callers_each_get_their_own_reply_and_every_call_runs_once(
    client: redis.Redis,
) -> None:
    batcher = ScriptBatcher(client, SCRIPT)
    start = threading.Barrier(16)

    def one(n: int) -> tuple[int, bytes]:
        if n < 16:
            start.wait()  # the first sixteen arrive together: they must share pipelines
        total, tag = batcher(["counter"], [1, f"caller-{n}"])
        return int(total), tag

    with ThreadPoolExecutor(max_workers=16) as pool:
        replies = list(pool.map(one, range(400)))

    assert [tag for _, tag in replies] == [f"caller-{n}".encode() for n in range(400)]
    assert sorted(total for total, _ in replies) == list(range(1, 401))
    assert int(client.get("counter") or 0) == 400


def test_a_caller_whose_call_fails_gets_its_error_and_the_others_their_replies(
    client: redis.Redis,
) -> None:
    client.set("not-a-number", "x")
    client.rpush("a-list", "x")
    batcher = ScriptBatcher(client, SCRIPT)
    start = threading.Barrier(8)

    def one(n: int) -> object:
        start.wait()
        key = "a-list" if n == 3 else "fine"
        try:
            return batcher([key], [1, str(n)])
        except ResponseError as error:
            return error

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(one, range(8)))

    assert isinstance(replies[3], ResponseError)
    assert "WRONGTYPE" in str(replies[3])
    for n, reply in enumerate(replies):
        if n != 3:
            assert isinstance(reply, list) and reply[1] == str(n).encode(), reply
    assert int(client.get("fine") or 0) == 7


def test_a_script_cache_flushed_under_it_is_loaded_again_without_running_twice(
    client: redis.Redis,
) -> None:
    batcher = ScriptBatcher(client, SCRIPT)
    assert batcher(["counter"], [5, "a"])[0] == 5
    client.script_flush()  # what a Redis restart or a failover does to the cache

    assert batcher(["counter"], [5, "b"]) == [10, b"b"]
    assert int(client.get("counter") or 0) == 10


def test_every_waiting_caller_hears_that_redis_is_gone(fresh_redis: RedisServer) -> None:
    connection = redis.Redis.from_url(fresh_redis.url, socket_timeout=1, socket_connect_timeout=1)
    batcher = ScriptBatcher(connection, SCRIPT)
    assert batcher(["counter"], [1, "up"])[0] == 1
    fresh_redis.stop()
    start = threading.Barrier(6)

    def one(n: int) -> BaseException | None:
        start.wait()
        try:
            batcher(["counter"], [1, str(n)])
        except RedisConnectionError as error:
            return error
        return None

    with ThreadPoolExecutor(max_workers=6) as pool:
        errors = list(pool.map(one, range(6)))

    assert all(isinstance(error, RedisConnectionError) for error in errors), errors
    # and once Redis is back, the same batcher serves again (the fixture restarts it)
    fresh_redis.start()
    assert batcher(["again"], [2, "back"]) == [2, b"back"]
