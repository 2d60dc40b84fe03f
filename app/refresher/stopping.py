"""How the refresher's program stops: SIGTERM or SIGINT, and gone within ``STOP_WITHIN_S``.

The signal sets an event that the loop and the lease thread wait on (every wait of theirs is
a slice of at most ``STOP_CHECK_S``, every Redis and upstream call has a timeout), then the
program closes what it holds (the lease, handed over at once; the source and its tape; the
track record) in the time that is left. A wait nobody can bound (a name lookup has no
timeout) must not hold the process: a watchdog logs what happened and ends the process
``STOP_MARGIN_S`` before the bound.

The handler itself takes no lock: it notes the deadline and writes one byte to a pipe. A
thread started with ``install`` (so never from inside a handler) reads it, sets the event and
keeps the watchdog. Setting an event or starting a thread in the handler could deadlock the
process for good: a handler runs between two bytecodes of the main thread, which may then hold
that same event's lock (inside ``Event.wait``) or the lock Python takes to start a thread.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from types import FrameType

log = logging.getLogger(__name__)

STOP_WITHIN_S = 5.0  # from SIGTERM or SIGINT to the exit, in every state (docs/operations.md)
STOP_MARGIN_S = 0.5  # the watchdog ends the process this long before the bound
WATCHDOG_STATUS = 1  # the exit status when the watchdog had to end it


class Stopping:
    """The program's stop request: ``event`` is set by SIGTERM or SIGINT (see the module)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self._deadline: float | None = None
        self._wake_fd: int | None = None

    def install(self) -> None:
        """Take SIGTERM and SIGINT over (main thread): from now on they request the stop."""
        read_fd, self._wake_fd = os.pipe()
        threading.Thread(
            target=self._keep, args=(read_fd,), name="probboard-stop-watchdog", daemon=True
        ).start()
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def left(self) -> float:
        """Seconds left for closing after the signal (the whole bound before one)."""
        if self._deadline is None:
            return STOP_WITHIN_S - STOP_MARGIN_S
        return max(0.0, self._deadline - time.monotonic())

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._deadline is not None:
            return  # already stopping (Ctrl-C, then make run's SIGTERM): same deadline
        self._deadline = time.monotonic() + STOP_WITHIN_S - STOP_MARGIN_S
        assert self._wake_fd is not None  # the handler is installed with its pipe
        os.write(self._wake_fd, b"!")  # no lock taken here (see the module docstring)

    def _keep(self, read_fd: int) -> None:
        """Wait for the signal's byte, ask for the stop, then end the process at the deadline
        if it is still here (something did not return)."""
        os.read(read_fd, 1)
        self.event.set()
        time.sleep(self.left())
        log.error(
            "not stopped %.1f s after the signal: exiting now (a wait without a timeout?)",
            STOP_WITHIN_S - STOP_MARGIN_S,
        )
        os._exit(WATCHDOG_STATUS)  # the handler flushed the line; nothing else is owed
