"""Where the CPU went during a measurement: per process (with its threads) and per core.

Reads ``/proc`` twice and subtracts: ``CpuMeter(pids).start()`` then ``.stop()`` gives each
named process's CPU as a share of one core, and each core's busy share, over the span. A
child that ends within the span is waited for with ``reap``, which keeps its last figure.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def process_ticks(pid: int) -> int:
    """User + system CPU ticks of a process (all its threads); 0 once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


def core_ticks() -> dict[str, tuple[int, int]]:
    """Per core (``cpu0``...): (busy, total) ticks since boot."""
    cores: dict[str, tuple[int, int]] = {}
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name != "cpu":
            ticks = [int(v) for v in values]
            idle = ticks[3] + ticks[4]  # idle + iowait
            cores[name] = (sum(ticks) - idle, sum(ticks))
    return cores


class CpuMeter:
    """CPU of named groups of processes and of each core between ``start`` and ``stop``."""

    def __init__(self, groups: Mapping[str, list[int]]) -> None:
        self.groups = {name: list(pids) for name, pids in groups.items()}
        self._procs: dict[str, int] = {}
        self._ended: dict[int, int] = {}  # pid -> its ticks when it ended (``reap``)
        self._cores: dict[str, tuple[int, int]] = {}
        self._at = 0.0

    def _sample(self) -> dict[str, int]:
        return {
            name: sum(self._ended.get(pid) or process_ticks(pid) for pid in pids)
            for name, pids in self.groups.items()
        }

    def reap(self, pid: int) -> int:
        """Wait for child ``pid`` to end and keep its CPU (gone from ``/proc`` by ``stop``);
        returns its exit code."""
        _, status, usage = os.wait4(pid, 0)
        self._ended[pid] = round((usage.ru_utime + usage.ru_stime) * TICKS)
        return os.waitstatus_to_exitcode(status)

    def start(self) -> CpuMeter:
        """Take the first reading."""
        self._procs, self._cores, self._at = self._sample(), core_ticks(), time.monotonic()
        return self

    def stop(self) -> dict[str, float]:
        """Each group's CPU in % of one core, and each core's busy %, since ``start``."""
        procs, cores = self._sample(), core_ticks()
        elapsed = max(1e-9, time.monotonic() - self._at)
        shares = {
            name: round(100.0 * (procs[name] - self._procs[name]) / TICKS / elapsed, 1)
            for name in self.groups
        }
        for name, (busy, total) in cores.items():
            before = self._cores.get(name, (0, 0))
            spent = max(1, total - before[1])
            shares[name] = round(100.0 * (busy - before[0]) / spent, 1)
        return shares
