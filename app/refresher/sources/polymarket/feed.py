"""A WebSocket feed in its own thread: connect, subscribe, keep alive, reconnect.

Polymarket's sockets expect a text ``PING`` at an interval (not WebSocket pings). Any
failure (refused, dropped, silent for ``SILENCE_S``, unparseable) ends the connection; the
thread reconnects with exponential backoff and full jitter, and logs once per outage.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from typing import Any

from websockets.sync.client import ClientConnection, connect

log = logging.getLogger(__name__)

BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 15.0
SILENCE_S = 30.0  # no DATA for this long (pongs do not count): reconnect


class Feed(threading.Thread):
    """Subclasses say what to subscribe to and what to do with each message."""

    name_for_logs = "feed"
    ping_every_s = 10.0

    def __init__(self, url: str, stop: threading.Event) -> None:
        super().__init__(name=f"probboard-{self.name_for_logs}", daemon=True)
        self.url = url
        self.stop_event = stop
        self.connected = False
        self.messages = 0
        self._generation = 0  # bumped to force a resubscription

    def subscription(self) -> list[str] | None:
        """Text frames to send after connecting; None while there is nothing to watch."""
        raise NotImplementedError

    def handle(self, message: Any) -> None:
        """Handle one parsed JSON message."""
        raise NotImplementedError

    def on_connect(self) -> None:
        """Hook: a new connection is up (state from an old one must be rebuilt)."""

    def resubscribe(self) -> None:
        """Reconnect with a fresh subscription (the watched assets changed)."""
        self._generation += 1

    def run(self) -> None:
        """Connect and reconnect until the stop event is set."""
        backoff = BACKOFF_FIRST_S
        failing = False
        while not self.stop_event.is_set():
            frames = self.subscription()
            if not frames:
                self.stop_event.wait(0.2)
                continue
            try:
                with connect(
                    self.url, open_timeout=5, close_timeout=1, ping_interval=None, max_size=2**23
                ) as ws:
                    self._session(ws, frames)
                backoff = BACKOFF_FIRST_S
            except Exception as exc:  # any failure: reconnect later
                if not failing:
                    log.warning("%s: %s (%s); reconnecting", self.name_for_logs, exc, self.url)
                failing = True
            else:
                failing = False
            self.connected = False
            if self.stop_event.is_set():
                break
            self.stop_event.wait(random.uniform(0, backoff))  # noqa: S311 - jitter
            backoff = min(BACKOFF_MAX_S, backoff * 2)

    def _session(self, ws: ClientConnection, frames: list[str]) -> None:
        generation = self._generation
        for frame in frames:
            ws.send(frame)
        self.connected = True
        self.on_connect()
        log.info("%s: connected to %s", self.name_for_logs, self.url)
        last_ping = last_heard = time.monotonic()
        while not self.stop_event.is_set() and generation == self._generation:
            now = time.monotonic()
            if now - last_ping >= self.ping_every_s:
                ws.send("PING")
                last_ping = now
            if now - last_heard > SILENCE_S:
                raise TimeoutError(f"silent for {SILENCE_S:.0f} s")
            try:
                raw = ws.recv(timeout=0.5)
            except TimeoutError:
                continue
            if isinstance(raw, bytes):
                raw = raw.decode("utf-8", errors="replace")
            if raw.strip().upper() in ("PONG", "PING", ""):
                continue  # a socket that only answers pings has still stopped sending data
            last_heard = time.monotonic()
            try:
                message = json.loads(raw)
            except ValueError:
                log.debug("%s: ignored a frame that is not JSON", self.name_for_logs)
                continue
            self.messages += 1
            try:
                self.handle(message)
            except Exception:
                log.exception("%s: could not handle a message", self.name_for_logs)


def each(message: Any) -> list[dict[str, Any]]:
    """A message or a JSON array of messages, as a list of objects."""
    items = message if isinstance(message, list) else [message]
    return [item for item in items if isinstance(item, dict)]
