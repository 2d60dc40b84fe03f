"""A WebSocket feed in its own thread: connect, subscribe, keep alive, reconnect.

Polymarket's sockets expect a text ``PING`` at an interval (not WebSocket pings). Any
failure (refused, dropped, silent for ``SILENCE_S``, unparseable) ends the connection; the
thread reconnects with exponential backoff and full jitter. The backoff starts afresh after
a healthy session (data over ``HEALTHY_S`` at least), so a feed that drops now and then
reconnects as fast as the first time, while one that fails at once keeps backing off.

An outage is logged twice: a WARNING with its reason when it starts, an INFO with its length
and the number of attempts when it ends, which is when data flows again (a connection that
opens and drops at once is part of the outage, not its end).

A feed measures its sessions and outages on ``clock`` and waits out its backoff with
``pause`` (both injected; the real monotonic clock and the stop event's wait by default), so
a test can drive the time that passes between reconnects instead of sleeping through it.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from websockets.sync.client import connect

from app.metrics.refresher import UPSTREAM_ERRORS, UPSTREAM_RECONNECTS

if TYPE_CHECKING:
    from app.refresher.tape import Tape

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 15.0
HEALTHY_S = 5.0  # a session that delivered data over this long: the next backoff starts afresh
SILENCE_S = 30.0  # no DATA for this long (pongs do not count): reconnect


class Connection(Protocol):
    """What a feed uses of a WebSocket connection."""

    def send(self, message: str) -> None:
        """Send one text frame."""

    def recv(self, timeout: float | None = None) -> str | bytes:
        """The next frame; ``TimeoutError`` after ``timeout``."""

    def close(self) -> None:
        """Close the connection."""


class RecordedConnection:
    """A connection whose frames and events go to a tape, as they happen."""

    def __init__(self, inner: Connection, tape: Tape, src: str) -> None:
        self._inner = inner
        self._tape = tape
        self._src = src
        self._closed = False
        tape.event(src, "connect")

    def send(self, message: str) -> None:
        """Send, then record the frame as sent."""
        self._inner.send(message)
        self._tape.sent(self._src, message)

    def recv(self, timeout: float | None = None) -> str | bytes:
        """Receive, and record the frame as received (PONGs included)."""
        try:
            raw = self._inner.recv(timeout=timeout)
        except TimeoutError:
            raise
        except Exception:
            self._disconnected()
            raise
        text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw
        self._tape.received(self._src, text)
        return raw

    def close(self) -> None:
        """Close, and record the disconnect (once)."""
        try:
            self._inner.close()
        finally:
            self._disconnected()

    def _disconnected(self) -> None:
        if not self._closed:
            self._closed = True
            self._tape.event(self._src, "disconnect")


class Outage:
    """When a feed went down, and how many connections were tried since."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.attempts = 0

    def summary(self) -> str:
        """``back after 3.2 s (2 attempts)``."""
        length = self._clock() - self.started
        plural = "" if self.attempts == 1 else "s"
        return f"back after {length:.1f} s ({self.attempts} attempt{plural})"


class Feed(threading.Thread):
    """Subclasses say what to subscribe to and what to do with each message."""

    name_for_logs = "feed"
    tape_src = "feed"  # the feed's name on a tape (docs/tapes.md)
    ping_every_s = 10.0

    def __init__(
        self,
        url: str,
        stop: threading.Event,
        clock: Callable[[], float] = time.monotonic,
        pause: Callable[[float], object] | None = None,
    ) -> None:
        super().__init__(name=f"probboard-{self.name_for_logs}", daemon=True)
        self.url = url
        self.stop_event = stop
        self._now = clock  # sessions, silences, pings and outages are measured on it
        self._pause = pause if pause is not None else stop.wait  # waits out a backoff
        self.backoff_s = BACKOFF_FIRST_S  # the ceiling of the backoff being waited out
        self.connected = False
        self._connected_before = False  # a later connection counts as a reconnect
        self.messages = 0
        self._ws: Connection | None = None  # the connection being read
        self.tape: Tape | None = None  # set before start() to record every frame
        self._outage: Outage | None = None  # down since, until data flows again
        self._data_since: float | None = None  # first data on this session (monotonic s)
        self._data_last = 0.0
        self._wake = threading.Event()  # set when there may be something to subscribe to

    def subscription(self) -> list[str] | None:
        """Text frames to send after connecting; None while there is nothing to watch."""
        raise NotImplementedError

    def handle(self, message: Any) -> None:
        """Handle one parsed JSON message."""
        raise NotImplementedError

    def on_connect(self) -> None:
        """Hook: a new connection is up and subscribed."""

    def on_text(self, text: str) -> None:
        """Hook: a text frame that is not JSON (other than PING/PONG)."""
        log.debug("%s: ignored a frame that is not JSON: %.60s", self.name_for_logs, text)

    def pending(self) -> list[str]:
        """Hook: frames to send on the open connection now (called between reads)."""
        return []

    def wake(self) -> None:
        """There may be something to subscribe to now (or the feed stops): stop waiting."""
        self._wake.set()

    def wants_new_connection(self) -> bool:
        """Hook: True to open a new connection (subscribed afresh) before closing this one."""
        return False

    def _open(self) -> Connection:
        connection = connect(
            self.url, open_timeout=5, close_timeout=1, ping_interval=None, max_size=2**23
        )
        # Entered by hand: a connection can outlive the block that opened it (it is
        # replaced make-before-break), and each is closed explicitly.
        opened = connection.__enter__()
        if self.tape is not None:
            return RecordedConnection(opened, self.tape, self.tape_src)
        return opened

    def run(self) -> None:
        """Connect and reconnect until the stop event is set."""
        backoff = BACKOFF_FIRST_S
        while not self.stop_event.is_set():
            self._wake.clear()  # before asking: a wake from now on ends the wait below
            frames = self.subscription()
            if not frames:
                self._wake.wait(0.2)
                continue
            if self._outage is not None:
                self._outage.attempts += 1
            self._data_since = None
            try:
                self._session(self._open(), frames)
                backoff = BACKOFF_FIRST_S  # ended on our side (a resubscription)
            except Exception as exc:  # any failure: reconnect later
                UPSTREAM_ERRORS.labels(self.name_for_logs).inc()
                if self._was_healthy():
                    backoff = BACKOFF_FIRST_S
                self._down(exc)
            self.connected = False
            if self.stop_event.is_set():
                break
            self.backoff_s = backoff
            self._pause(random.uniform(0, backoff))  # noqa: S311 - jitter
            backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _down(self, reason: Exception) -> None:
        """A session failed: the start of an outage (logged), or one more failed attempt."""
        if self._outage is None:
            self._outage = Outage(self._now)
            log.warning("%s: %s (%s); reconnecting", self.name_for_logs, reason, self.url)
        else:
            attempt = self._outage.attempts
            log.debug("%s: attempt %d failed: %s", self.name_for_logs, attempt, reason)

    def _was_healthy(self) -> bool:
        """Whether the session that just ended delivered data over ``HEALTHY_S`` at least."""
        return self._data_since is not None and self._data_last - self._data_since >= HEALTHY_S

    def _heard(self) -> None:
        """Data arrived: the session is alive, and an outage (if any) is over."""
        now = self._now()
        if self._data_since is None:
            self._data_since = now
        self._data_last = now
        if self._outage is not None:
            log.info("%s: %s", self.name_for_logs, self._outage.summary())
            self._outage = None

    def _session(self, ws: Connection, frames: list[str]) -> None:
        self._ws = ws
        try:
            self._serve(ws, frames)
        finally:
            if self._ws is not None:
                self._ws.close()
            self._ws = None

    def _serve(self, ws: Connection, frames: list[str]) -> None:
        for frame in frames:
            ws.send(frame)
        self.connected = True
        if self._connected_before:
            UPSTREAM_RECONNECTS.labels(self.name_for_logs).inc()
        self._connected_before = True
        self.on_connect()
        # In an outage the line that matters is the one when data flows again (``_heard``).
        level = logging.INFO if self._outage is None else logging.DEBUG
        log.log(level, "%s: connected to %s", self.name_for_logs, self.url)
        last_ping = last_heard = self._now()
        while not self.stop_event.is_set():
            for frame in self.pending():
                ws.send(frame)
            if self.wants_new_connection():
                ws = self._replace(ws)
                last_ping = last_heard = self._now()
            now = self._now()
            if now - last_ping >= self.ping_every_s:
                ws.send("PING")
                last_ping = now
            if now - last_heard > SILENCE_S:
                raise TimeoutError(f"silent for {SILENCE_S:.0f} s")
            try:
                raw = ws.recv(timeout=0.1)
            except TimeoutError:
                continue
            if self.receive(raw):
                last_heard = self._now()
                self._heard()

    def receive(self, raw: str | bytes) -> bool:
        """Parse and handle one received frame (the live loop and a replay both call this);
        False for a keep-alive, which says nothing about the data."""
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        text = raw.strip()
        if text.upper() in ("PONG", "PING", ""):
            return False  # a socket that only answers pings has still stopped sending data
        try:
            message = json.loads(raw)
        except ValueError:
            self.on_text(text)
            return True
        self.messages += 1
        try:
            self.handle(message)
        except Exception:
            log.exception("%s: could not handle a message", self.name_for_logs)
        return True

    def _replace(self, old: Connection) -> Connection:
        """Make before break: open and subscribe a new connection, then close the old one.
        If the new one cannot be had, the old one stays (the subclass asks again later)."""
        frames = self.subscription()
        if not frames:
            return old
        try:
            fresh = self._open()
        except Exception as exc:
            log.warning("%s: no new connection (%s); keeping the old one", self.name_for_logs, exc)
            return old
        try:
            for frame in frames:
                fresh.send(frame)
        except Exception as exc:
            fresh.close()
            log.warning(
                "%s: the new connection failed (%s); keeping the old one", self.name_for_logs, exc
            )
            return old
        self._ws = fresh
        old.close()
        self.on_connect()
        log.info("%s: moved to a new connection (new subscription)", self.name_for_logs)
        return fresh


def each(message: Any) -> list[dict[str, Any]]:
    """A message or a JSON array of messages, as a list of objects."""
    items = message if isinstance(message, list) else [message]
    return [item for item in items if isinstance(item, dict)]
