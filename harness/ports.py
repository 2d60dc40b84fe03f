"""Loopback ports for the servers tests start: each pytest-xdist worker draws from its own block.

Asking the kernel for a free port (bind to port 0, close, hand the number on) races twice:
between two workers, which may both be told the same port before either server binds it, and
with every outbound connection on the machine, whose source port the kernel takes from the
same ephemeral range (``/proc/sys/net/ipv4/ip_local_port_range``). So the ports handed out
here lie below that range, split into one block per process of the test session (the
controller or a plain run, then ``gw0``, ``gw1``, ...; ``PYTEST_XDIST_WORKER``), and a
process walks its own block from a random start, skipping any port something holds. A
stopped server's port (a restartable Redis, a dead address in a refusal test) is not handed
out again until the block wraps around.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

LOWEST = 10_000  # below: well-known and registered services people run by hand
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
MAX_BLOCKS = 32  # enough for -n 31; more workers share blocks (still checked before use)


def _ephemeral_low() -> int:
    """The first port of the kernel's range for outbound connections (32768 by default)."""
    try:
        low = int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768
    return low if low > LOWEST + MAX_BLOCKS * 100 else 32768


def _slot() -> int:
    """0 outside xdist (or in its controller); ``N + 1`` in worker ``gwN``."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if worker.startswith("gw") and worker[2:].isdigit():
        return (int(worker[2:]) + 1) % MAX_BLOCKS
    return 0


class _Block:
    """This process's block of ports and where it has got to."""

    def __init__(self) -> None:
        size = (_ephemeral_low() - LOWEST) // MAX_BLOCKS
        self.first = LOWEST + _slot() * size
        self.size = size
        self.pid = os.getpid()
        # A random start, so two sessions of this suite on one machine rarely walk in step.
        self.offset = random.SystemRandom().randrange(size)

    def next_port(self) -> int:
        """The next port of the block that nothing is bound to right now."""
        for _ in range(self.size):
            port = self.first + self.offset
            self.offset = (self.offset + 1) % self.size
            if _bindable(port):
                return port
        raise RuntimeError(f"no free port in {self.first}..{self.first + self.size - 1}")


def _bindable(port: int) -> bool:
    """True when 127.0.0.1:``port`` can be bound now (no listener, no TIME_WAIT left on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


_block: _Block | None = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now, and no other worker is handed."""
    global _block
    if _block is None or _block.pid != os.getpid():  # a forked child draws afresh
        _block = _Block()
    return _block.next_port()
