"""The Redis bus: latest board in a key, each new one announced on a pub/sub channel.

A web worker holds ONE subscription, opened lazily after fork in a background thread (a
greenlet under gunicorn's gevent workers). After subscribing, and after every reconnect, it
reads the key, so a board published while it was away is not missed. redis-py does not
reliably notice a pub/sub connection that died with the server, so the subscriber pings
when the channel is quiet and treats a silent connection as dead.
"""

from __future__ import annotations

import logging
import random
import threading
import time

import redis

from app.board.snapshot import Snapshot
from app.bus import Listener
from app.bus.receiver import SnapshotHolder

log = logging.getLogger(__name__)

BOARD_KEY = "probboard:board:latest"
BOARD_CHANNEL = "probboard:board"

PING_AFTER_S = 3.0  # ping when nothing arrived for this long
DEAD_AFTER_S = 8.0  # no message and no pong for this long: the connection is dead
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
HEALTH_CACHE_S = 1.0
FIRST_SYNC_WAIT_S = 1.0  # the first request of a worker waits this long for the key read
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, OSError)


def redis_client(url: str, timeout_s: float = 2.0) -> redis.Redis:
    """A client with short timeouts; creating it opens no connection."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        socket_keepalive=True,
        retry_on_timeout=False,
    )


class RedisBoardBus:
    """Bus backend on a Redis server; see the module docstring."""

    embedded = False

    def __init__(self, url: str) -> None:
        self._url = url
        self._client = redis_client(url)
        self._holder = SnapshotHolder()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._synced = threading.Event()  # set once the first connection attempt is over
        self._subscribed = False
        self._state = "not started"
        self._health: tuple[float, bool, str] = (0.0, False, "not checked")

    # -- refresher side -------------------------------------------------------------
    def publish(self, board_json: str) -> None:
        """Store the board in the key and announce it, atomically."""
        pipe = self._client.pipeline(transaction=True)
        pipe.set(BOARD_KEY, board_json)
        pipe.publish(BOARD_CHANNEL, board_json)
        pipe.execute()

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
        """Ready when Redis answers a PING and the subscription is live (cached for 1 s)."""
        checked_at, ready, text = self._health
        now = time.monotonic()
        if now - checked_at < HEALTH_CACHE_S:
            return ready, text
        if self._thread is not None:
            self._synced.wait(FIRST_SYNC_WAIT_S)
        try:
            self._client.ping()
            if self._thread is None or self._subscribed:
                ready, text = True, "ready"
            else:
                ready, text = False, f"subscriber reconnecting ({self._state})"
        except REDIS_ERRORS as exc:
            ready, text = False, f"unreachable: {type(exc).__name__}"
        self._health = (now, ready, text)
        return ready, text

    def _run(self) -> None:
        backoff = BACKOFF_FIRST_S
        while not self._stop.is_set():
            try:
                self._listen()
                backoff = BACKOFF_FIRST_S
            except REDIS_ERRORS as exc:
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

    def _listen(self) -> None:
        client = redis_client(self._url, timeout_s=DEAD_AFTER_S)
        pubsub = client.pubsub()  # type: ignore[no-untyped-call]
        try:
            pubsub.subscribe(BOARD_CHANNEL)
            raw = client.get(BOARD_KEY)
            if raw is not None:
                self._holder.accept(raw)
            if not self._subscribed:
                log.info("board subscription established")
            self._subscribed = True
            self._state = "subscribed"
            self._synced.set()
            last_heard = time.monotonic()
            pinged = False
            while not self._stop.is_set():
                message = pubsub.get_message(timeout=1.0)
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
