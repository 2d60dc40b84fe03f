"""Each HTTP exchange with an upstream has one overall deadline (``deadline.py``), against a
loopback server of its own on a raw socket that can trickle its answer a byte at a time
(every 0.5 s: each read gets a byte well inside the client's 3 s read timeout)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.refresher.sources.polymarket.http_deadline import DeadlineTransport
from app.refresher.sources.polymarket.recording import RecordingTransport
from app.refresher.tape import Tape

BODY = json.dumps({"slug": "btc-updown-5m", "note": "x" * 40}).encode()
ANSWER = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    + f"Content-Length: {len(BODY)}\r\n\r\n".encode()
    + BODY
)
HEADERS_LENGTH = ANSWER.index(b"\r\n\r\n") + 4
TRICKLE_S = 0.5  # a byte this often: the whole answer would take about a minute
DEADLINE_S = 1.0


class TrickleServer:
    """Answers every request with ``ANSWER``: its first ``fast`` bytes at once, the rest a
    byte every ``TRICKLE_S``. One thread accepts; one thread serves each connection."""

    def __init__(self) -> None:
        self.fast = len(ANSWER)  # the whole answer at once unless a test says otherwise
        self.requests = 0
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)  # so the accepting thread sees the stop
        self._threads = [threading.Thread(target=self._accept, daemon=True)]
        self._threads[0].start()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}"

    def stop(self) -> None:
        """Stop serving: every thread ends (a trickle at its next byte), the socket closes."""
        self._stop.set()
        for thread in self._threads:
            thread.join(5)
        self._listener.close()
        assert not any(thread.is_alive() for thread in self._threads)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            thread = threading.Thread(target=self._serve, args=(connection,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, connection: socket.socket) -> None:
        with connection:
            connection.settimeout(5)
            request = b""
            try:
                while b"\r\n\r\n" not in request:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    request += chunk
                self.requests += 1
                connection.sendall(ANSWER[: self.fast])
                for i in range(self.fast, len(ANSWER)):
                    if self._stop.wait(TRICKLE_S):
                        return
                    connection.sendall(ANSWER[i : i + 1])
            except OSError:
                return  # the client gave up and closed: nothing more to send


@pytest.fixture
def server() -> Iterator[TrickleServer]:
    """A trickle server, stopped (its threads joined) at the end."""
    # Own trickle server: each test sets how much it sends at once.
    running = TrickleServer()
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def client() -> Iterator[httpx.Client]:
    """A client as the refresher builds it, over a transport with a 1 s deadline."""
    with httpx.Client(
        timeout=httpx.Timeout(3.0, connect=2.0), transport=DeadlineTransport(DEADLINE_S)
    ) as made:
        yield made


def timed_out(client: httpx.Client, url: str) -> tuple[httpx.HTTPError, float]:
    """The error of a GET that must fail, and how long it took."""
    start = time.monotonic()
    with pytest.raises(httpx.HTTPError) as failed:
        client.get(url)
    return failed.value, time.monotonic() - start


@pytest.mark.parametrize("fast", [0, HEADERS_LENGTH], ids=["headers-trickled", "body-trickled"])
def test_a_trickled_answer_fails_by_the_deadline(
    server: TrickleServer, client: httpx.Client, fast: int
) -> None:
    server.fast = fast

    error, elapsed = timed_out(client, server.url + "/events/slug/x")

    assert isinstance(error, httpx.TimeoutException), repr(error)
    assert DEADLINE_S * 0.9 <= elapsed < DEADLINE_S + 3.0  # not a minute of trickle


def test_a_fast_answer_is_read_whole_before_and_after_a_timeout(
    server: TrickleServer, client: httpx.Client
) -> None:
    assert client.get(server.url + "/a").json() == json.loads(BODY)
    server.fast = HEADERS_LENGTH
    assert isinstance(timed_out(client, server.url + "/b")[0], httpx.ReadTimeout)
    server.fast = len(ANSWER)

    response = client.get(server.url + "/c")  # the deadline is per exchange, not per client

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert response.content == BODY
    assert response.http_version == "HTTP/1.1"
    assert server.requests == 3


def test_a_refused_connection_is_httpx_connect_error(client: httpx.Client) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
    with pytest.raises(httpx.ConnectError):
        client.get(f"http://127.0.0.1:{port}/")


def test_the_tape_records_exchanges_through_the_deadline(
    server: TrickleServer, tmp_path: Path
) -> None:
    """``RecordingTransport`` around the deadline: a good answer is recorded with its body,
    a timed-out one with status 0, and the timeout still reaches the caller."""
    tape = Tape(tmp_path)
    tape.start()
    transport = RecordingTransport(DeadlineTransport(DEADLINE_S), tape, {server.url: "gamma"})
    with httpx.Client(timeout=httpx.Timeout(3.0, connect=2.0), transport=transport) as recorded:
        assert recorded.get(server.url + "/good").content == BODY
        server.fast = 0
        error, _ = timed_out(recorded, server.url + "/slow")
    tape.close()

    assert isinstance(error, httpx.TimeoutException)
    lines = [json.loads(line) for f in tmp_path.glob("*.jsonl") for line in f.open()]
    exchanges = [(line["src"], line["url"], line["status"], line["frame"]) for line in lines]
    assert exchanges == [
        ("gamma", server.url + "/good", 200, BODY.decode()),
        ("gamma", server.url + "/slow", 0, ""),
    ]
