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

``--windows`` (issue 39) compares ``/latest`` on four markets in one window (the baseline)
with the same markets in two (``WINDOWS=5m,15m``: the default board, then ``?window=15m``):
the work a second window adds to a request, which ``bench.latest --windows`` measures
through gunicorn and wrk with more noise.

    python -m bench.request_cpu [--calls 5000] [--samples 7] [--cpu 1] [PATH ...]
    python -m bench.request_cpu --windows
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

from app.markets import parse_symbols, parse_windows
from app.refresher.loop import Refresher
from app.refresher.sources.simulated import SimulatedSource
from app.services import services_of
from app.web import create_app

PATHS = ["/api/probboard/latest", "/api/health"]
LATEST = "/api/probboard/latest"
FOUR = "BTC,ETH,SOL,XRP"  # --windows: the markets of both boards


def _app(workdir: str, symbols: str = "BTC", windows: str = "5m") -> Flask:
    """An app on memory:// serving ``symbols`` in ``windows``, with one board published and
    a guest limit nobody reaches."""
    app = create_app(
        {
            "SYMBOLS": symbols,
            "WINDOWS": windows,
            "REDIS_URL": "memory://",
            "SECRET_KEY": "bench-secret-0123456789",
            "API_KEY_PEPPER": "bench-pepper-" + "x" * 32,
            "EMBEDDED_REFRESHER": "false",
            "SIMULATION_SEED": "7",
            "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3",
            "GUEST_RATE_LIMIT": "1000000000 per minute",
            "LOG_LEVEL": "WARNING",
        }
    )
    with app.app_context():
        source = SimulatedSource(parse_symbols(symbols), seed=1, spans=parse_windows(windows))
        Refresher(source, services_of(app).bus, 500).tick()
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
    parser.add_argument(
        "--windows", action="store_true", help=f"/latest on {FOUR} x 5m against x 5m,15m"
    )
    args = parser.parse_args()
    os.sched_setaffinity(0, {args.cpu})
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        if args.windows:
            single, double = _app(one, FOUR, "5m"), _app(two, FOUR, "5m,15m")
            callers = {
                "4x1 /latest": _caller(single, LATEST),
                "4x2 /latest": _caller(double, LATEST),
                "4x2 /latest?window=15m": _caller(double, LATEST + "?window=15m"),
            }
        else:
            app = _app(one)
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
    baseline = statistics.median(next(iter(samples.values())))
    for path, values in samples.items():
        median = statistics.median(values)
        print(f"{path:30} min {min(values):7.1f}  median {median:7.1f}  "
              f"rate vs the first {baseline / median:5.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
