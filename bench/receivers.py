"""The webhook receivers of ``bench.alerts``: each tells when each call (by its webhook-id)
arrived, in ``time.time()`` seconds.

- ``NginxReceiver``: a real nginx on loopback, its own process (pinned with ``cpus``), that
  answers every POST 204 and logs ``$msec $http_webhook_id`` per call. It keeps connections
  between calls and costs the delivery side nothing it would not meet at a production
  endpoint: the figures are the alerts system's.
- ``PythonReceiver``: ``harness.receiver.Receiver`` (``ThreadingHTTPServer``) in the bench's
  own process, the tests' receiver: each call takes a thread and the GIL there, so under
  1,000 calls its own queue is part of what it measures.
"""

from __future__ import annotations

import time
from pathlib import Path
from types import TracebackType
from typing import Protocol

from harness.ports import free_port
from harness.processes import Process, on_cpus, port_open
from harness.receiver import Receiver


class Arrivals(Protocol):
    """A receiver as the bench reads it."""

    url: str

    def arrivals(self) -> dict[str, float]:
        """Each call's webhook-id and its arrival."""
        ...


class NginxReceiver:
    """See the module docstring; a context manager that starts and always stops it."""

    def __init__(self, workdir: Path, cpus: str | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/hook"
        self._log = workdir / "arrivals.log"
        self._read = 0
        self._seen: dict[str, float] = {}
        conf = workdir / "receiver-nginx.conf"
        conf.write_text(
            f"pid {workdir / 'receiver-nginx.pid'};\n"
            f"error_log {workdir / 'receiver-nginx-error.log'};\n"
            "worker_processes 1;\nevents { worker_connections 4096; }\n"
            "http {\n"
            "  log_format arrival '$msec $http_webhook_id';\n"
            f"  access_log {self._log} arrival;\n"
            f"  server {{\n    listen 127.0.0.1:{self.port};\n"
            "    keepalive_requests 100000;\n"
            "    location /hook { return 204; }\n  }\n}\n"
        )
        self._argv = on_cpus(
            ["nginx", "-c", str(conf), "-p", str(workdir), "-g", "daemon off;"], cpus
        )
        self._output = workdir / "receiver.log"
        self._process: Process | None = None

    def __enter__(self) -> NginxReceiver:
        # Started here, not when made: a ``with`` that fails before entering it (another
        # context of the same statement) would never stop it.
        self._process = Process(self._argv, {"PATH": "/usr/sbin:/usr/bin:/bin"}, self._output)
        deadline = time.monotonic() + 10
        while not port_open(self.port):
            if time.monotonic() > deadline or not self._process.alive():
                self._process.stop()
                raise RuntimeError(f"nginx did not start:\n{self._process.output()}")
            time.sleep(0.05)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        if self._process is not None:
            self._process.stop()

    def arrivals(self) -> dict[str, float]:
        """Each call's webhook-id and its arrival (the log read on from where it was)."""
        if self._log.exists():
            with self._log.open("rb") as log:
                log.seek(self._read)
                chunk = log.read()
            whole = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits
            self._read += len(whole)
            for line in whole.decode().splitlines():
                stamp, _, delivery_id = line.partition(" ")
                self._seen.setdefault(delivery_id, float(stamp))
        return dict(self._seen)


class PythonReceiver(Receiver):
    """``harness.receiver.Receiver`` read as the bench reads a receiver."""

    def __enter__(self) -> PythonReceiver:
        super().__enter__()
        return self

    def arrivals(self) -> dict[str, float]:
        """Each call's webhook-id and its first arrival."""
        found: dict[str, float] = {}
        for call in list(self.calls):
            found.setdefault(call.headers.get("webhook-id", ""), call.at)
        return found
