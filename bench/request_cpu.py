"""CPU per request of the app itself: WSGI calls in process, no server, no network.

Builds the app on ``memory://`` (simulated board, one tick published), then calls it
directly with a WSGI environ for each path, ``--calls`` times per sample, and reports the
CPU time per call (``time.process_time``: time on the CPU only, so another process that
shares the machine does not count) as the minimum and median of ``--samples`` samples. The
bench pins itself to ``--cpu``. Paths are measured interleaved, so a slow moment of the
machine weighs on each alike.

What it shows that ``bench.latest`` cannot: what a piece of the app costs per request
(a hook, a limit step) apart from gunicorn, gevent, sockets and Redis. A guest ``/latest``
here counts on the in-memory storage; on Redis the same request also pays a round trip.

    python -m bench.request_cpu [--calls 5000] [--samples 7] [--cpu 1] [PATH ...]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable

from flask import Flask
from werkzeug.test import EnvironBuilder

from app.markets import parse_symbols
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app

PATHS = ["/api/probboard/latest", "/api/health"]


def _app(workdir: str) -> Flask:
    """An app on memory:// with one board published and a guest limit nobody reaches."""
    app = create_app(
        {
            "REDIS_URL": "memory://",
            "SECRET_KEY": "bench",
            "API_KEY_PEPPER": "bench-pepper-" + "x" * 32,
            "EMBEDDED_REFRESHER": "false",
            "SIMULATION_SEED": "7",
            "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3",
            "GUEST_RATE_LIMIT": "1000000000 per minute",
            "LOG_LEVEL": "WARNING",
        }
    )
    with app.app_context():
        Refresher(SimulatedSource(parse_symbols("BTC"), seed=1), services_of(app).bus, 500).tick()
    return app


def _caller(app: Flask, path: str) -> Callable[[], str]:
    """One WSGI call of ``path`` as a guest from 127.0.0.1; returns the status line."""
    base = EnvironBuilder(path=path, environ_base={"REMOTE_ADDR": "127.0.0.1"}).get_environ()
    status: list[str] = [""]

    def start_response(
        line: str, headers: list[tuple[str, str]], exc_info: object = None
    ) -> Callable[[bytes], object]:
        status[0] = line
        return lambda data: None

    def call() -> str:
        environ = dict(base)
        environ["wsgi.input"] = io.BytesIO()
        body: Iterable[bytes] = app(environ, start_response)
        for _ in body:
            pass
        getattr(body, "close", lambda: None)()
        return status[0]

    return call


def main() -> int:
    """Measure each path and print µs of CPU per call."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("paths", nargs="*", default=PATHS)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--cpu", type=int, default=1)
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    with tempfile.TemporaryDirectory() as workdir:
        app = _app(workdir)
        callers = {path: _caller(app, path) for path in args.paths}
        for path, call in callers.items():
            for _ in range(1000):  # warm: caches, the first board's pieces, the allocator
                status = call()
            if not status.startswith("200"):
                print(f"bench: {path} answered {status}")
                return 1
        samples: dict[str, list[float]] = {path: [] for path in callers}
        for _ in range(args.samples):
            for path, call in callers.items():
                started = time.process_time()
                for _ in range(args.calls):
                    call()
                samples[path].append((time.process_time() - started) / args.calls * 1e6)
    print(f"CPU per call, µs ({args.samples} samples of {args.calls} calls, CPU {args.cpu})")
    for path, values in samples.items():
        print(f"{path:30} min {min(values):7.1f}  median {statistics.median(values):7.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
