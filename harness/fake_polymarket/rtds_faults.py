"""RTDS's faults of the connection (``FakeRtds`` has them): floods of error frames and
repeated drops after healthy spells. Kept apart from the prices ``FakeRtds`` plays."""

from __future__ import annotations

import math
import time

from harness.fake_polymarket.rtds_socket import _RtdsSocket


class _RtdsConnectionFaults(_RtdsSocket):
    """The RTDS socket with its connection faults: ``flood_errors`` and ``drop_after``."""

    def flood_errors(self, per_s: float) -> None:
        """Send about ``per_s`` error frames a second to every connection, each with a
        message of its own (and three status codes in turn); 0 stops the flood."""
        self._flood_per_s = per_s
        with self._lock:
            if self._flooding or per_s <= 0:
                return
            self._flooding = True
        self._spawn(self._flood)

    def _flood(self) -> None:
        count = 0
        step_s = 0.01
        while not self._stopping.wait(step_s):
            rate = self._flood_per_s
            for _ in range(max(0, round(rate * step_s))):
                count += 1
                status = (400, 429, 500)[count % 3]
                for client in self.clients:
                    self._error(client, status, f"upstream trouble #{count} (request {count:x})")

    def drop_after(self, healthy_s: float, times: int) -> None:
        """In a thread, ``times`` times over: once a connection has been up ``healthy_s``,
        drop every connection (its time goes to ``drops``)."""

        def run() -> None:
            dropped_at = -math.inf
            for _ in range(times):
                while not self._stopping.is_set():
                    # Only connections opened since the last drop (a dropped one may linger
                    # in the list for a moment).
                    opened = [c.opened_at for c in self.clients if c.opened_at > dropped_at]
                    if opened and time.monotonic() - min(opened) >= healthy_s:
                        break
                    self._stopping.wait(0.02)
                if self._stopping.is_set():
                    return
                dropped_at = time.monotonic()
                self.drops.append(dropped_at)
                self.drop()

        self._spawn(run)
