"""The Redis bus: latest board in a key, each new one announced on a pub/sub channel.

A web worker holds ONE subscription, opened lazily after fork in a background thread (a
greenlet under gunicorn's gevent workers). After subscribing, and after every reconnect, it
reads the key, so a board published while it was away is not missed. redis-py does not
reliably notice a pub/sub connection that died with the server, so the subscriber pings
when the channel is quiet and treats a silent connection as dead.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time

import redis

from app.board.snapshot import Snapshot, parse_snapshot
from app.bus.base import HISTORY_MS, Listener, PublishRefusedError
from app.bus.receiver import SnapshotHolder, after
from app.metrics.common import REDIS_ERRORS as REDIS_ERRORS_TOTAL
from app.redis_pool import DEFAULT_POOL_SIZE, PoolBusyError, redis_client

log = logging.getLogger(__name__)

BOARD_KEY = "probboard:board:latest"
BOARD_CHANNEL = "probboard:board"
HISTORY_KEY = "probboard:board:history"
LEADER_KEY = "probboard:refresher:leader"  # the refreshers' lease (app.refresher.leader)
SEQ_KEY = "probboard:board:seq"  # the last seq published

PING_AFTER_S = 3.0  # ping when nothing arrived for this long
DEAD_AFTER_S = 8.0  # no message and no pong for this long: the connection is dead
LISTEN_WAIT_S = 1.0  # longest wait for a message: how late the subscriber sees close()
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
HEALTH_CACHE_S = 1.0
PROBE_WAIT_S = 2.5  # longest a readiness probe can take (a PING with a 2 s timeout)
FIRST_SYNC_WAIT_S = 1.0  # the first request of a worker waits this long for the key read
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)

# KEYS: leader lease, last seq, latest board, history; ARGV: fence ("" for none), seq,
# board, channel, oldest seq to keep. {0} lease not held, {-1, last seq} seq not above it,
# {1, ""} published ({1, error} when only the history could not take it).
_PUBLISH = """
local seq = tonumber(ARGV[2])
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[1] ~= '' then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then return {0, ''} end
  if seq <= last then return {-1, tostring(last)} end
end
if seq > last then redis.call('SET', KEYS[2], ARGV[2]) end
redis.call('SET', KEYS[3], ARGV[3])
redis.call('PUBLISH', ARGV[4], ARGV[3])
local added = redis.pcall('XADD', KEYS[4], 'MINID', '~', ARGV[5], ARGV[2] .. '-0', 'b', ARGV[3])
if type(added) == 'table' and added.err then return {1, added.err} end
return {1, ''}
"""


class RedisBoardBus:
    """Bus backend on a Redis server; see the module docstring."""

    embedded = False

    def __init__(self, url: str, pool_size: int = DEFAULT_POOL_SIZE) -> None:
        self._url = url
        self._client = redis_client(url, size=pool_size)
        self._holder = SnapshotHolder()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._synced = threading.Event()  # set once the first connection attempt is over
        self._subscribed = False
        self._state = "not started"
        # Readiness as last probed: (monotonic time, ready, text); one probe at a time.
        self._health: tuple[float, bool, str] = (0.0, False, "not checked")
        self._probing = threading.Lock()
        self._probed = threading.Event()
        self._history_failing = False
        self._publish = self._client.register_script(_PUBLISH)

    # -- refresher side -------------------------------------------------------------
    def publish(self, board_json: str, fence: str | None = None) -> None:
        """Store the board in the key, add it to the history and announce it: one script.

        With ``fence``, only while that lease token holds ``LEADER_KEY`` and the board's seq
        is above ``SEQ_KEY`` (``PublishRefusedError`` otherwise). The history is a Redis stream
        whose entry ids are the boards' ``seq``, trimmed to ``HISTORY_MS``; an unfenced
        board that cannot be added (a seq not above the newest) is still stored and
        announced.
        """
        seq = int(json.loads(board_json)["seq"])
        status, detail = self._publish(
            keys=[LEADER_KEY, SEQ_KEY, BOARD_KEY, HISTORY_KEY],
            args=[fence or "", seq, board_json, BOARD_CHANNEL, seq - HISTORY_MS],
        )
        if status == 0:
            raise PublishRefusedError("lease")
        if status == -1:
            raise PublishRefusedError("seq", int(detail))
        failed = bool(detail)
        if failed and not self._history_failing:
            log.warning("a board was not added to the stream history: %s", detail)
        self._history_failing = failed

    def history(self, after_seq: int, count: int | None = None) -> list[Snapshot] | None:
        """The boards after ``after_seq`` from the stream history (one round trip), when
        ``after_seq`` is still in it, the first ``count`` of them when given (only those are
        read and parsed); None when not, or when Redis cannot say."""
        # The entry of ``after_seq`` itself comes first: it says the id is held.
        limit = None if count is None else count + 1
        try:
            entries = self._client.xrange(HISTORY_KEY, min=f"{after_seq}-0", max="+", count=limit)
        except (*REDIS_ERRORS, PoolBusyError, redis.ResponseError):
            return None
        held = []
        for _, fields in entries or []:
            raw = (fields or {}).get(b"b")
            if raw is None:
                continue
            try:
                held.append(parse_snapshot(raw))
            except (ValueError, TypeError):
                continue
        return after(held, after_seq)

    def sampled(self, since_seq: int, until_seq: int, step_ms: int) -> list[Snapshot]:
        """The first board of each ``step_ms`` of the history from ``since_seq`` to
        ``until_seq``, in one round trip (a pipeline of ``XRANGE ... COUNT 1``, one per
        step): a worker's trail reads one board a second, not the 20 the history may hold."""
        steps = range(since_seq, until_seq + 1, step_ms)
        try:
            pipe = self._client.pipeline(transaction=False)
            for start in steps:
                last = min(start + step_ms - 1, until_seq)
                pipe.xrange(HISTORY_KEY, min=f"{start}-0", max=f"{last}", count=1)
            answers = pipe.execute()
        except (*REDIS_ERRORS, PoolBusyError, redis.ResponseError):
            return []
        held = []
        for entries in answers:
            for _, fields in entries or []:
                try:
                    held.append(parse_snapshot((fields or {})[b"b"]))
                except (KeyError, ValueError, TypeError):
                    continue
        return held

    # -- worker side ----------------------------------------------------------------
    def latest(self) -> Snapshot | None:
        """The newest board this worker received; starts the subscriber on first use."""
        if not self._synced.is_set():
            self.start()
            self._synced.wait(FIRST_SYNC_WAIT_S)
        return self._holder.snapshot

    def add_listener(self, listener: Listener) -> None:
        """Call ``listener`` (in the subscriber thread) with every new board."""
        self._holder.add_listener(listener)

    def start(self) -> None:
        """Start the subscriber thread once per process."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="probboard-bus-subscriber", daemon=True
            )
            self._thread.start()

    def close(self) -> None:
        """Stop the subscriber and drop connections."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=5)
        self._thread = None
        self._client.close()

    def status(self) -> tuple[bool, str]:
        """Ready when Redis answers a PING and the subscription is live.

        Answered from the state this worker keeps: at most one probe a second, and one at a
        time; concurrent callers get the last probed state instead of sending PINGs of their
        own (a thousand health checks at once must not look like an outage to themselves).
        """
        checked_at, ready, text = self._health
        if time.monotonic() - checked_at < HEALTH_CACHE_S:
            return ready, text
        if not self._probing.acquire(blocking=False):
            if not self._probed.is_set():  # no state yet: wait for the first probe
                self._probed.wait(FIRST_SYNC_WAIT_S + PROBE_WAIT_S)
            _, ready, text = self._health
            return ready, text
        try:
            self._health = self._probe()
        finally:
            self._probing.release()
            self._probed.set()
        _, ready, text = self._health
        return ready, text

    def _probe(self) -> tuple[float, bool, str]:
        if self._thread is not None:
            self._synced.wait(FIRST_SYNC_WAIT_S)
        try:
            self._client.ping()
        except PoolBusyError:
            # Busy is not down: keep the last state, probe again next time.
            previous = self._health
            return (time.monotonic(), previous[1], previous[2])
        except REDIS_ERRORS as exc:
            return (time.monotonic(), False, f"unreachable: {type(exc).__name__}")
        if self._thread is None or self._subscribed:
            return (time.monotonic(), True, "ready")
        return (time.monotonic(), False, f"subscriber reconnecting ({self._state})")

    def _run(self) -> None:
        backoff = BACKOFF_FIRST_S
        while not self._stop.is_set():
            try:
                self._listen()
                backoff = BACKOFF_FIRST_S
            except REDIS_ERRORS as exc:
                REDIS_ERRORS_TOTAL.labels("bus_subscriber").inc()
                self._synced.set()
                if self._subscribed or self._state == "not started":
                    log.warning("board subscription lost: %s; reconnecting", type(exc).__name__)
                self._subscribed = False
                self._state = f"{type(exc).__name__}"
            except Exception:  # a bug must not end the subscriber for good
                self._subscribed = False
                self._state = "unexpected error"
                log.exception("board subscriber failed; restarting it")
            if self._stop.is_set():
                break
            # Full jitter spreads the workers' reconnects after a Redis restart.
            self._stop.wait(random.uniform(backoff / 2, backoff))  # noqa: S311
            backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _catch_up(self, client: redis.Redis) -> None:
        """After (re)subscribing: the boards published while this worker was away, in order
        (from the history, so a stream misses none of them), else the latest one."""
        held = self._holder.snapshot
        missed = self.history(held.seq) if held is not None else None
        if missed is not None:
            for snapshot in missed:  # validated by history()
                self._holder.keep(snapshot)
            return
        raw = client.get(BOARD_KEY)
        if raw is not None:
            self._holder.accept(raw)

    def _listen(self) -> None:
        client = redis_client(self._url, timeout_s=DEAD_AFTER_S)
        pubsub = client.pubsub()  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe(BOARD_CHANNEL)
            self._catch_up(client)
            if not self._subscribed:
                log.info("board subscription established")
            self._subscribed = True
            self._state = "subscribed"
            self._synced.set()
            last_heard = time.monotonic()
            pinged = False
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=LISTEN_WAIT_S)
                now = time.monotonic()
                if message is not None:
                    last_heard = now
                    pinged = False
                    if message["type"] == "message":
                        self._holder.accept(message["data"])
                    continue
                quiet = now - last_heard
                if quiet > DEAD_AFTER_S:
                    raise redis.ConnectionError("no message and no pong: connection is dead")
                if quiet > PING_AFTER_S and not pinged:
                    pubsub.ping()
                    pinged = True
        finally:
            pubsub.close()
            client.close()
