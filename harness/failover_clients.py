"""Clients that keep going through a failover, and a record of every board on the bus.

``ResumingStream`` is a vip_pro client as the README tells one to behave: when its stream
ends, it reconnects with ``Last-Event-ID``. ``Poller`` polls ``/latest`` as a guest and keeps
every status and data age. ``BusRecorder`` subscribes to the board channel (following a
Sentinel failover like the service does) and keeps (seq, publisher) of every board.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import redis

from app.redis_pool import redis_client
from harness.processes import http_get
from harness.stream_client import Closed, Event, ResponseEnd, StreamConnection

LATEST = "/api/probboard/latest"


@dataclass
class StreamLog:
    """What a resuming stream client saw."""

    seqs: list[int] = field(default_factory=list)
    connects: int = 0
    refusals: list[int] = field(default_factory=list)  # statuses other than 200
    errors: list[str] = field(default_factory=list)


class ResumingStream:
    """A stream client in a thread that reconnects with ``Last-Event-ID`` when it ends."""

    def __init__(self, port: int, key: str) -> None:
        self.port = port
        self.key = key
        self.log = StreamLog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last: str | None = None
        while not self._stop.is_set():
            headers = {"X-API-Key": self.key}
            if last is not None:
                headers["Last-Event-ID"] = last
            try:
                conn = StreamConnection(self.port, headers, timeout=5)
            except (OSError, AssertionError) as exc:
                self.log.errors.append(f"connect: {type(exc).__name__}")
                self._stop.wait(0.2)
                continue
            if conn.status != 200:
                self.log.refusals.append(conn.status)
                self._stop.wait(0.5)
                continue
            self.log.connects += 1
            with conn:
                while not self._stop.is_set():
                    item = conn.next_item(0.5)
                    if item is None:
                        continue
                    if isinstance(item, Event) and item.type == "board":
                        self.log.seqs.append(int(item.id))
                        last = item.id
                    elif isinstance(item, (Closed, ResponseEnd)):
                        break
            self._stop.wait(0.1)

    def stop(self) -> StreamLog:
        """Stop and return the log."""
        self._stop.set()
        self._thread.join(10)
        return self.log


@dataclass
class PollLog:
    """What a polling guest saw."""

    statuses: list[int] = field(default_factory=list)
    ages_ms: list[int] = field(default_factory=list)  # dataAgeMs of every 200
    stale_thresholds: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)

    @property
    def server_errors(self) -> list[int]:
        """Every 5xx answer."""
        return [status for status in self.statuses if status >= 500]


class Poller:
    """A guest polling ``/latest`` every ``period`` seconds in a thread."""

    def __init__(self, base: str, period: float = 0.05) -> None:
        self.base = base
        self.period = period
        self.log = PollLog()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                status, _, body = http_get(self.base + LATEST, timeout=5)
            except OSError as exc:
                self.log.errors.append(type(exc).__name__)
                continue
            self.log.statuses.append(status)
            if status == 200:
                board: dict[str, Any] = json.loads(body)
                self.log.ages_ms.append(int(board["dataAgeMs"]))
                self.log.stale_thresholds.add(int(board["staleThresholdMs"]))

    def stop(self) -> PollLog:
        """Stop and return the log."""
        self._stop.set()
        self._thread.join(10)
        return self.log


class BusRecorder:
    """Every board announced on the bus: (seq, publisher), in the order they arrived."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.boards: list[tuple[int, str | None]] = []
        self.arrivals: list[float] = []  # monotonic time of each
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            client = redis_client(self.url, timeout_s=2.0, size=2)
            try:
                pubsub = client.pubsub()  # type: ignore[no-untyped-call]
                pubsub.subscribe("probboard:board")
                while not self._stop.is_set():
                    message = pubsub.get_message(timeout=0.5)
                    if message is not None and message["type"] == "message":
                        board = json.loads(message["data"])
                        self.boards.append((int(board["seq"]), board.get("publisher")))
                        self.arrivals.append(time.monotonic())
            except (redis.RedisError, OSError):
                self._stop.wait(0.2)
            finally:
                with contextlib.suppress(redis.RedisError, OSError):
                    client.close()

    def since(self, moment: float) -> list[tuple[int, str | None]]:
        """The boards that arrived after ``moment`` (monotonic)."""
        return [b for b, at in zip(self.boards, self.arrivals, strict=False) if at > moment]

    def first_after(self, moment: float, other_than: str | None = None) -> float | None:
        """When the first board after ``moment`` arrived (from a publisher other than
        ``other_than``, when given); None before one has."""
        for (_, publisher), at in zip(self.boards, self.arrivals, strict=False):
            if at > moment and (other_than is None or publisher != other_than):
                return at
        return None

    def stop(self) -> None:
        """Stop listening."""
        self._stop.set()
        self._thread.join(10)


def strictly_increasing(seqs: list[int]) -> bool:
    """True when every seq is above the one before."""
    return all(a < b for a, b in itertools.pairwise(seqs))


def never_back(seqs: list[int]) -> bool:
    """True when no seq is below the one before (a stale board is sent again, same seq)."""
    return all(a <= b for a, b in itertools.pairwise(seqs))


def interleaved(publishers: list[str | None]) -> list[str | None]:
    """The publishers that came back after another one had published (empty: none did)."""
    runs = [name for name, _ in itertools.groupby(publishers)]
    seen: set[str | None] = set()
    back = []
    for name in runs:
        if name in seen:
            back.append(name)
        seen.add(name)
    return back
