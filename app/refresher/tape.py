"""Tapes: every upstream exchange of the refresher, as it happened, one JSON object per line.

The format is documented in ``docs/tapes.md`` (it is the contract between the recorder, the
replay and any other tool). Lines go to hourly files named by their UTC hour
(``2026-11-24T13.jsonl``), in ``t`` order: the time is read under the same lock that queues
the line, so the queue is in time order whichever thread recorded.

Recording never slows or stops the refresher: ``record`` only queues (a full queue drops the
line and counts it), and one thread of the tape's own writes. A write that fails (a full
disk, a folder gone) is logged once; recording pauses for ``RETRY_S`` (lines of the pause
are dropped and counted) and then tries again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import queue
import threading
import time
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)

QUEUE_SIZE = 100_000
RETRY_S = 30.0
FLUSH_S = 1.0  # lines reach the file within about this long


def hour_name(t: float) -> str:
    """The file a line of time ``t`` goes to: its UTC hour, ``YYYY-MM-DDTHH.jsonl``."""
    return time.strftime("%Y-%m-%dT%H", time.gmtime(t)) + ".jsonl"


class Tape:
    """Records lines to hourly files in ``directory`` from any thread (see the module)."""

    def __init__(self, directory: Path | str, clock: Any = time.time) -> None:
        self.directory = Path(directory)
        self._clock = clock
        self._lock = threading.Lock()
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(QUEUE_SIZE)
        self._thread: threading.Thread | None = None
        self.written = 0
        self.dropped = 0
        self._paused_until = 0.0
        self._file: IO[str] | None = None
        self._file_name = ""

    # -- what the feeds and the HTTP client call --------------------------------------------
    def received(self, src: str, frame: str) -> None:
        """A frame received on socket ``src`` (PONGs included)."""
        self._put({"src": src, "frame": frame})

    def sent(self, src: str, frame: str) -> None:
        """A frame sent on socket ``src``."""
        self._put({"src": src, "dir": "out", "frame": frame})

    def event(self, src: str, event: str) -> None:
        """``connect`` or ``disconnect`` of socket ``src``."""
        self._put({"src": src, "event": event})

    def exchange(
        self, src: str, method: str, url: str, body: str | None, status: int, frame: str
    ) -> None:
        """An HTTP exchange, at the time of its response (``status`` 0: it failed)."""
        self._put(
            {"src": src, "method": method, "url": url, "body": body, "status": status,
             "frame": frame}
        )  # fmt: skip

    def _put(self, line: dict[str, Any]) -> None:
        with self._lock:
            line = {"t": self._clock(), **line}
            try:
                self._queue.put_nowait(line)
            except queue.Full:
                self.dropped += 1

    # -- the writer ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the writer thread (once)."""
        if self._thread is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._thread = threading.Thread(target=self._run, name="probboard-tape", daemon=True)
            self._thread.start()

    def close(self, timeout: float = 5.0) -> None:
        """Write what is queued (waiting at most ``timeout``) and close the file."""
        if self._thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=timeout)
        self._thread.join(timeout)
        self._thread = None

    def _run(self) -> None:
        last_flush = time.monotonic()
        while True:
            try:
                line = self._queue.get(timeout=FLUSH_S)
            except queue.Empty:
                line = {}
            if line is None:
                break
            if line:
                self._write(line)
            if self._file is not None and time.monotonic() - last_flush >= FLUSH_S:
                self._flush()
                last_flush = time.monotonic()
        self._flush()
        self._close_file()

    def _write(self, line: dict[str, Any]) -> None:
        if time.monotonic() < self._paused_until:
            self.dropped += 1
            return
        try:
            name = hour_name(line["t"])
            if name != self._file_name:
                self._close_file()
                self._file = open(self.directory / name, "a", encoding="utf-8")  # noqa: SIM115
                self._file_name = name
            assert self._file is not None
            self._file.write(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n")
            self.written += 1
        except OSError as exc:
            self._pause(exc)

    def _flush(self) -> None:
        if self._file is None:
            return
        try:
            self._file.flush()
        except OSError as exc:
            self._pause(exc)

    def _pause(self, exc: OSError) -> None:
        self.dropped += 1
        if time.monotonic() >= self._paused_until:
            log.error("tape: cannot write to %s (%s); recording paused", self.directory, exc)
        self._paused_until = time.monotonic() + RETRY_S
        self._close_file()

    def _close_file(self) -> None:
        if self._file is not None:
            # The lines a failing close held are lost: the pause that led here said so.
            with contextlib.suppress(OSError):
                self._file.close()
            self._file = None
            self._file_name = ""
