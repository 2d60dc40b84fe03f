"""The stream benchmark: N concurrent SSE clients against gunicorn + refresher on Redis.

Starts a redis-server, an SQLite accounts store with one vip_pro key, the refresher and
gunicorn (gevent workers, the project's gunicorn.conf.py), then runs bench.stream_client
with N clients from this machine and reports publish-to-receive latency (p50, p99, max),
delivery (boards received / boards published), errors, stalled clients and the server's
memory per stream (RSS of the workers with N streams minus idle, divided by N). The
baseline of the same run is the latency with a single client. Each size runs against a
freshly started gunicorn (same Redis, refresher and key), warmed up by a few streams.

    python -m bench.stream [--clients 10000] [--seconds 20] [--workers 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from app.refresher.sources import window_start
from harness.fake_polymarket import FakePolymarket
from harness.nginx import Nginx
from harness.processes import (
    BIN,
    ROOT,
    Process,
    RedisServer,
    free_port,
    service_env,
)
from harness.processes import http_get as get

RESULTS = ROOT / "bench" / "results.json"


class MarketMaker:
    """Moves UP's best bid of the current window at the fake CLOB ``per_s`` times a second
    (between two prices one tick apart), so boards flow at that rate."""

    def __init__(self, world: FakePolymarket, per_s: float) -> None:
        self.world = world
        self.period = 1.0 / per_s
        self.moves = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> None:
        """Start moving."""
        self._thread.start()

    def stop(self) -> None:
        """Stop moving."""
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            market = self.world.market(window_start(time.time()))
            if market is None:
                continue
            bid, ask = self.world.best(market.up_token)
            if bid is None or ask is None:
                continue
            # Alternately add and remove a bid one tick above the resting best bid.
            high = f"{bid + 0.01:.2f}" if self.moves % 2 == 0 else f"{bid:.2f}"
            if self.moves % 2 == 0 and bid + 0.015 < ask:
                self.world.set_level(market.up_token, "BUY", high, "50")
            elif self.moves % 2 == 1:
                self.world.set_level(market.up_token, "BUY", high, "0")
            self.moves += 1


def worker_rss_kb(master_pid: int) -> int:
    """Resident memory of gunicorn's workers (children of the master), in KiB."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    total = 0
    for pid in children:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1])
    return total


def run_clients(
    port: int,
    key: str,
    clients: int,
    seconds: float,
    master: int,
    procs: int,
    since: str = "publish",
) -> dict[str, Any]:
    """Run the load generator in ``procs`` processes; sample worker RSS once all connect."""
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    running = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.stream_client",
                "--port",
                str(port),
                "--key",
                key,
                "--clients",
                str(share),
                "--seconds",
                str(seconds),
                "--from",
                since,
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        for share in shares
        if share
    ]
    for proc in running:  # each prints "connected" once its clients are all in
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
    time.sleep(1.0)
    rss_loaded = worker_rss_kb(master)
    parts: list[dict[str, Any]] = []
    for proc in running:
        assert proc.stdout is not None
        parts.append(json.loads(proc.stdout.readline()))
        proc.wait(timeout=60)
    return merge(parts) | {"clients": clients, "rss_loaded_kb": rss_loaded}


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine the load generators' reports (latency quantiles from the pooled samples)."""
    samples: list[float] = [v for part in parts for v in part["latencies"]]
    samples.sort()

    def quantile(fraction: float) -> float:
        if not samples:
            return float("nan")
        return samples[min(len(samples) - 1, max(0, round(fraction * len(samples)) - 1))]

    errors: dict[str, int] = {}
    for part in parts:
        for kind, count in part["errors"].items():
            errors[kind] = errors.get(kind, 0) + count
    connected = sum(part["connected"] for part in parts)
    published = max((part["boards_published"] for part in parts), default=0)
    received = sum(part["boards_received"] for part in parts)
    return {
        "connected": connected,
        "errors": errors,
        "boards_published": published,
        "delivery": received / (connected * published) if connected and published else 0.0,
        "stalled": sum(part["stalled"] for part in parts),
        "skipped": sum(part.get("skipped", 0) for part in parts),
        "newest": sum(part.get("have_newest", 0) for part in parts) / connected
        if connected
        else 0.0,
        "latency_ms": {
            "p50": quantile(0.50),
            "p99": quantile(0.99),
            "max": samples[-1] if samples else float("nan"),
            "samples": len(samples),
        },
    }


def start_web(env: dict[str, str], log: Path) -> tuple[Process, int]:
    """gunicorn with the project's settings on a free port, answering and settled."""
    port = free_port()
    web = Process(
        [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "-b", f"127.0.0.1:{port}",
         "wsgi:app"], env, log,
    )  # fmt: skip
    for _ in range(100):
        try:
            if get(f"http://127.0.0.1:{port}/api/health", timeout=1)[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    time.sleep(2)  # both workers up and subscribed
    return web, port


def main() -> int:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--clients", type=int, nargs="+", default=[10000])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--client-procs", type=int, default=2)
    parser.add_argument(
        "--source",
        choices=("simulated", "polymarket"),
        default="simulated",
        help="polymarket: the fake upstreams, a market maker moving UP's best bid "
        "--changes-per-s times a second, and latency from each change's arrival "
        "(newestInputMs) to the client",
    )
    parser.add_argument("--changes-per-s", type=float, default=10.0)
    parser.add_argument(
        "--via-nginx",
        action="store_true",
        help="clients connect through nginx with the repository's site config",
    )
    parser.add_argument("--nginx-workers", type=int, default=1)
    args = parser.parse_args()
    world = maker = None
    since = "publish"
    if args.source == "polymarket":
        world = FakePolymarket(auto_markets=True).start()
        world.rtds.live(period_s=1.0)
        maker = MarketMaker(world, args.changes_per_s)
        since = "input"

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="probboard-bench-stream-") as tmp:
        workdir = Path(tmp)
        redis = RedisServer(workdir)
        redis.start()
        env = service_env(
            REDIS_URL=redis.url,
            DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
            API_KEY_PEPPER="bench-pepper-0123456789",
            WEB_CONCURRENCY=str(args.workers),
            STREAM_MAX_PER_KEY="100000",
            TRACK_RECORD="false",
            **(world.env() if world is not None else {}),
        )
        flask = [str(BIN / "flask"), "--app", "wsgi"]
        subprocess.run([*flask, "db", "upgrade"], env=env, cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([*flask, "users", "create", "bench", "--plan", "vip_pro"], env=env,
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        created = subprocess.run([*flask, "keys", "create", "bench"], env=env, cwd=ROOT,
                                 check=True, capture_output=True, text=True)  # fmt: skip
        key = created.stdout.split()[-1]
        refresher = Process([*flask, "refresher"], env, workdir / "refresher.log")
        web: Process | None = None
        if maker is not None:
            maker.start()
        try:
            for clients in [1, *args.clients]:
                # A fresh server per size: one run's closed streams, heap and sockets do
                # not weigh on the next, and the idle memory is a clean baseline.
                web, port = start_web(env, workdir / f"gunicorn-{clients}.log")
                proxy = Nginx(workdir, [port], args.nginx_workers) if args.via_nginx else None
                if proxy is not None:
                    port = proxy.port
                # A short warm-up, so "idle" is a worker that has served streams before (its
                # first stream's one-time allocations are not charged to every stream).
                run_clients(port, key, min(clients, 100), 2, web.pid, 1)
                time.sleep(1)
                idle = worker_rss_kb(web.pid)
                procs = min(args.client_procs, clients)
                row = run_clients(port, key, clients, args.seconds, web.pid, procs, since)
                row["rss_idle_kb"] = idle
                row["kb_per_stream"] = (row["rss_loaded_kb"] - idle) / max(1, row["connected"])
                rows.append(row)
                if row["errors"]:
                    print(f"gunicorn log (tail), for the errors:\n{web.output()[-3000:]}")
                    errors_log = workdir / "nginx-error.log"
                    if proxy is not None and errors_log.exists():
                        print(f"nginx error log (tail):\n{errors_log.read_text()[-2000:]}")
                web.stop()
                web = None
                if proxy is not None:
                    proxy.stop()
                time.sleep(5)  # let the closed connections of this size settle
        finally:
            if web is not None:
                web.stop()
            refresher.stop()
            redis.stop()
            if maker is not None:
                maker.stop()
            if world is not None:
                world.stop()

    via = "; through nginx (deploy/nginx-probboard.conf)" if args.via_nginx else ""
    print(f"latency from {'each change at the fake CLOB' if since == 'input' else 'publication'}"
          f" to the client; source {args.source}{via}")  # fmt: skip
    print(f"{'clients':>8} {'conn':>6} {'err':>5} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} "
          f"{'deliv':>6} {'newest':>6} {'stall':>5} {'KB/strm':>8}")  # fmt: skip
    for row in rows:
        lat = row["latency_ms"]
        print(
            f"{row['clients']:>8} {row['connected']:>6} {sum(row['errors'].values()):>5} "
            f"{lat['p50']:>7.1f} {lat['p99']:>7.1f} {lat['max']:>8.1f} "
            f"{row['delivery']:>6.3f} {row['newest']:>6.3f} {row['stalled']:>5} "
            f"{row['kb_per_stream']:>8.1f}"
        )
    baseline = rows[0]["latency_ms"]["p99"]
    for row in rows[1:]:
        print(f"p99 at {row['clients']} clients = {row['latency_ms']['p99'] / baseline:.1f} x "
              f"the single-client p99 ({baseline:.1f} ms)")  # fmt: skip
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    name = "stream" if args.source == "simulated" else "stream_on_change"
    results[name + ("_nginx" if args.via_nginx else "")] = {
        "rows": rows,
        "settings": vars(args),
    }
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
