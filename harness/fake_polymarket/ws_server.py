"""What every WebSocket stand-in (the CLOB's market channel, RTDS) is built on: a
``websockets`` sync server on a free loopback port, in a thread, that hands each parsed JSON
message to the stand-in's ``on_message``.

The switches every WebSocket fake has: it answers the text ``PING`` with ``PONG`` and can
drop its connections (``drop()``: the sockets just close), refuse new ones (``refuse =
True``: HTTP 503 at the handshake), go silent (``silent = True``: nothing at all, not even
``PONG``) or freeze the current connections (``freeze()``: ``PONG`` still answered, no data,
as the real RTDS is known to do).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve


class _Client:
    """One accepted WebSocket connection."""

    def __init__(self, connection: ServerConnection) -> None:
        self.connection = connection
        self.frozen = False  # PONG answered, no data
        self.assets: set[str] = set()  # CLOB: the assets this connection receives
        self.pending: set[str] = set()  # CLOB: subscribed, waiting for a slow snapshot
        self.market_subscribed = False  # CLOB: its one ``type: "market"`` frame was taken
        self.streams: set[tuple[str, str]] = set()  # RTDS: (topic, Chainlink symbol) pairs
        self.opened_at = time.monotonic()
        self._lock = threading.Lock()

    @property
    def topics(self) -> set[str]:
        """RTDS: the topics this connection receives, of any symbol."""
        return {topic for topic, _ in self.streams}

    @property
    def symbols(self) -> set[str]:
        """RTDS: the Chainlink symbols this connection receives, on any topic."""
        return {symbol for _, symbol in self.streams}

    def send(self, text: str) -> None:
        """Send a text frame; a connection that has gone is no error here."""
        with self._lock, contextlib.suppress(ConnectionClosed, OSError, RuntimeError):
            self.connection.send(text)

    def drop(self) -> None:
        """Close the socket without a closing handshake: a connection that just drops."""
        with contextlib.suppress(OSError, RuntimeError):
            self.connection.close_socket()


class _WsFake:
    """A websockets sync server in a thread, with the switches every WS fake has."""

    path = "/"

    def __init__(self) -> None:
        # The wall clock the fake stamps its answers with (the world's: ``running(clock=...)``).
        self.clock: Callable[[], float] = time.time
        self.refuse = False
        self.silent = False
        self.connections = 0  # accepted so far
        self.accepted_at: list[float] = []  # monotonic time of each accepted connection
        self.pings = 0
        self.subscriptions: list[Any] = []  # every subscribe message received, parsed
        self._clients: list[_Client] = []
        self._lock = threading.Lock()
        self._server: Server | None = None
        self._thread: threading.Thread | None = None
        self._tickers: list[threading.Thread] = []
        self._stopping = threading.Event()

    @property
    def url(self) -> str:
        """``ws://127.0.0.1:PORT/path``."""
        assert self._server is not None, "not started"
        return f"ws://127.0.0.1:{self._server.socket.getsockname()[1]}{self.path}"

    def now_ms(self) -> int:
        """Epoch milliseconds on the fake's wall clock."""
        return int(self.clock() * 1000)

    def start(self) -> None:
        """Listen on a free port."""
        self._server = serve(
            self._handle,
            "127.0.0.1",
            0,
            process_request=self._process_request,
            ping_interval=None,
            compression=None,
            close_timeout=1,
            max_size=2**22,
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Drop every connection and stop listening."""
        self._stopping.set()
        for ticker in list(self._tickers):
            ticker.join(5)
        self.drop()
        if self._server is not None:
            self._server.shutdown()
        if self._thread is not None:
            self._thread.join(5)

    @property
    def clients(self) -> list[_Client]:
        """The open connections."""
        with self._lock:
            return list(self._clients)

    def is_open(self, client: _Client) -> bool:
        """Whether ``client`` is still connected (a delayed reply must not outlive it)."""
        with self._lock:
            return client in self._clients

    def drop(self) -> None:
        """Drop every open connection (the sockets close; no close frame)."""
        for client in self.clients:
            client.drop()

    def freeze(self) -> None:
        """The current connections keep answering PING but carry no more data."""
        for client in self.clients:
            client.frozen = True

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if self.refuse:
            return connection.respond(503, "upstream unavailable\n")
        return None

    def _handle(self, connection: ServerConnection) -> None:
        client = _Client(connection)
        with self._lock:
            self._clients.append(client)
            self.connections += 1
            self.accepted_at.append(client.opened_at)
        try:
            for raw in connection:
                text = raw if isinstance(raw, str) else raw.decode(errors="replace")
                if text.strip() == "PING":
                    self.pings += 1
                    self.reply(client, "PONG")
                    continue
                try:
                    message = json.loads(text)
                except ValueError:
                    continue
                self.on_message(client, message)
        except ConnectionClosed:
            pass
        finally:
            with self._lock:
                self._clients.remove(client)

    def deliverable(self, client: _Client) -> bool:
        """Whether data may be sent to ``client`` now."""
        return not self.silent and not client.frozen

    def reply(self, client: _Client, text: str) -> None:
        """A control reply (``PONG``, ``INVALID OPERATION``...): frozen connections still get
        it, as they still get ``PONG``; a silent fake sends nothing at all."""
        if not self.silent:
            client.send(text)

    def on_message(self, client: _Client, message: Any) -> None:
        """Handle one parsed JSON message from ``client`` (each fake its own protocol)."""
        raise NotImplementedError

    def send_raw(self, message: Any) -> None:
        """Send anything to every connection (tests of garbage handling)."""
        text = message if isinstance(message, str) else json.dumps(message)
        for client in self.clients:
            if self.deliverable(client):
                client.send(text)

    def every(self, period_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` every ``period_s`` in a thread until the fake stops."""

        def loop() -> None:
            while not self._stopping.wait(period_s):
                action()

        self._spawn(loop)

    def later(self, delay_s: float, action: Callable[[], None]) -> None:
        """Run ``action`` once, ``delay_s`` from now, in a thread (not if the fake stops)."""

        def once() -> None:
            if not self._stopping.wait(delay_s):
                action()

        self._spawn(once)

    def _spawn(self, target: Callable[[], None]) -> None:
        thread = threading.Thread(target=target, daemon=True)
        with self._lock:
            # Finished one-shot threads are forgotten so the list does not grow for ever.
            self._tickers = [t for t in self._tickers if t.is_alive()]
            self._tickers.append(thread)
        thread.start()
