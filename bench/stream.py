"""The stream benchmark: N concurrent SSE clients against gunicorn + refresher on Redis.

Starts a redis-server, an SQLite accounts store with one vip_pro key, the refresher and
gunicorn (gevent workers, the project's gunicorn.conf.py), then runs bench.stream_client
with N clients from this machine and reports publish-to-receive latency (p50, p99, max),
delivery (boards received / boards published), errors, stalled clients and the server's
memory per stream (RSS of the workers with N streams minus idle, divided by N). The
baseline of the same run is the latency with a single client. Each size runs against a
freshly started gunicorn (same Redis, refresher and key), warmed up by a few streams.

``--markets BTC,ETH,SOL,XRP`` (issue 28, point 5) measures the same thing on the fake
Polymarket upstreams with every market's books moving (``bench.market_maker``: UP's and
DOWN's best bids of each market in turn, ``--changes-per-s`` per market, the markets
staggered; every market's Chainlink stream live), twice on the same world: served with
``SYMBOLS`` = the first market alone (the baseline), then with all of them. It prints both
and their ratio, the boards each client got per second, the smallest gap between two
published boards (coalescing: at most one per ``PUBLISH_MIN_INTERVAL_MS``), the delay of
every change to the first board that shows it (from ``--probes`` clients that read boards
whole, ``bench.stream_probe``), and where the CPU went. ``--pinned`` puts the service
(redis-server, the refresher, gunicorn) on CPU 0 and the world (this script with the fakes
and the market maker, the load generators, the probes) on CPU 1.

    python -m bench.stream [--clients 10000] [--seconds 20] [--workers 2]
    python -m bench.stream --markets BTC,ETH,SOL,XRP --clients 1000 --seconds 15 --pinned
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.markets import MARKETS, SPANS, parse_symbols, parse_windows
from bench.cpu import CpuMeter
from bench.market_maker import MarketMaker, change_delays
from harness.clocks import OffsetClock
from harness.fake_polymarket import FakePolymarket
from harness.nginx import Nginx
from harness.processes import (
    BIN,
    ROOT,
    Process,
    RedisServer,
    free_port,
    on_cpus,
    service_env,
)
from harness.processes import http_get as get
from harness.spans import FIVE_MINUTES

RESULTS = ROOT / "bench" / "results.json"
SERVER_CPUS = "0"  # --pinned: redis-server, the refresher, gunicorn
LOAD_CPUS = "1"  # --pinned: this script (the fakes, the market maker), load generators, probes
DEFAULT_MIN_INTERVAL_MS = 50  # PUBLISH_MIN_INTERVAL_MS unless the environment sets it


def worker_pids(master_pid: int) -> list[int]:
    """gunicorn's workers: the children of its master."""
    children = Path(f"/proc/{master_pid}/task/{master_pid}/children").read_text().split()
    return [int(pid) for pid in children]


def worker_rss_kb(master_pid: int) -> int:
    """Resident memory of gunicorn's workers (children of the master), in KiB."""
    total = 0
    for pid in worker_pids(master_pid):
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
    probes: int = 0,
    server: dict[str, list[int]] | None = None,
    windows: tuple[str, ...] = (),
    clock_offset_ms: int = 0,
) -> dict[str, Any]:
    """Run the load generator in ``procs`` processes (and ``probes`` of the ``clients`` in a
    probe process); sample worker RSS once all connect, and with ``server`` (name -> pids)
    the CPU of those and of the load from then until the figures are in. With ``windows``
    (served window lengths), the processes are spread over those windows' streams (each
    window's probes in a process of their own)."""
    load = clients - probes
    shares = [load // procs + (1 if i < load % procs else 0) for i in range(procs)]
    common = ["--port", str(port), "--key", key, "--seconds", str(seconds)]
    common += ["--clock-offset-ms", str(clock_offset_ms)]
    asked = list(windows) if len(windows) > 1 else [None]  # one window: the plain stream

    def window_of(i: int) -> list[str]:
        window = asked[i % len(asked)]
        return ["--window", window] if window else []

    commands = [
        [sys.executable, "-m", "bench.stream_client", *common, "--clients", str(share),
         "--from", since, *window_of(i)]
        for i, share in enumerate(shares)
        if share
    ]  # fmt: skip
    probe_shares = [probes // len(asked) + (1 if i < probes % len(asked) else 0)
                    for i in range(len(asked))]  # fmt: skip
    commands += [
        [sys.executable, "-m", "bench.stream_probe", *common, "--clients", str(share),
         *window_of(i)]
        for i, share in enumerate(probe_shares)
        if share
    ]  # fmt: skip
    running = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for command in commands
    ]
    for proc in running:  # each prints "connected" once its clients are all in
        assert proc.stdout is not None
        json.loads(proc.stdout.readline())
    time.sleep(1.0)
    rss_loaded = worker_rss_kb(master)
    groups = dict(server or {}) | {"load": [proc.pid for proc in running]}
    meter = CpuMeter(groups | {"bench": [os.getpid()]}).start()
    parts: list[dict[str, Any]] = []
    for proc in running:
        assert proc.stdout is not None
        parts.append(json.loads(proc.stdout.readline()))
        proc.returncode = meter.reap(proc.pid)
    cpu = meter.stop()
    probed = [part for part in parts if "boards" in part]
    return merge(parts) | {
        "clients": clients,
        "rss_loaded_kb": rss_loaded,
        "cpu_pct": cpu,
        "probes": probes,
        # Every board each probe read, and when it measured: analysed, then dropped.
        "_probed": [
            (boards, part["measure_ms"], part["window"])
            for part in probed
            for boards in part["boards"]
        ],
        "_window": probed[0]["measure_ms"] if probed else None,
    }


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """Combine the load generators' reports (latency quantiles from the pooled samples)."""
    samples: list[float] = [v for part in parts for v in part["latencies"]]
    samples.sort()

    errors: dict[str, int] = {}
    for part in parts:
        for kind, count in part["errors"].items():
            errors[kind] = errors.get(kind, 0) + count
    connected = sum(part["connected"] for part in parts)
    published = max((part["boards_published"] for part in parts), default=0)
    received = sum(part["boards_received"] for part in parts)
    measure_s = statistics.mean(part["measure_s"] for part in parts) if parts else 0.0
    return {
        "connected": connected,
        "errors": errors,
        "boards_published": published,
        "delivery": received / (connected * published) if connected and published else 0.0,
        "boards_per_client_s": received / connected / measure_s if connected and measure_s else 0.0,
        "stalled": sum(part["stalled"] for part in parts),
        "skipped": sum(part.get("skipped", 0) for part in parts),
        "newest": sum(part.get("have_newest", 0) for part in parts) / connected
        if connected
        else 0.0,
        "latency_ms": summary(samples),
    }


def quantile(ordered: list[float], fraction: float) -> float:
    """Nearest-rank quantile of sorted ``ordered`` (NaN when empty)."""
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]


def summary(samples: list[float]) -> dict[str, float]:
    """p50, p99, max and the count of ``samples``."""
    ordered = sorted(samples)
    return {
        "p50": quantile(ordered, 0.50),
        "p99": quantile(ordered, 0.99),
        "max": ordered[-1] if ordered else float("nan"),
        "samples": len(ordered),
    }


def coalescing(row: dict[str, Any], maker: MarketMaker, symbols: set[str]) -> dict[str, Any]:
    """From the probes' boards: each change's delay to the first board that shows it (a
    probe of one window's stream sees that window's changes), and the gaps between the
    boards published (their ids are publish times in epoch ms)."""
    served = set(row.get("windows") or (FIVE_MINUTES.name,))
    changes = [c for c in maker.changes if c.symbol in symbols and c.window in served]
    delays: list[float] = []
    unseen = 0
    gaps: list[int] = []
    waits: list[float] = []  # newest input -> build (the id): coalescing and building
    deliveries: list[float] = []  # build -> the probe: Redis, the worker, the socket
    for boards, (since_ms, until_ms), window in row.pop("_probed"):
        own = [c for c in changes if c.window == window]
        found, missed = change_delays(own, boards, since_ms, until_ms)
        delays += found
        unseen += missed
        measured = [b for b in boards if since_ms <= b["at"] <= until_ms]
        waits += [b["id"] - b["newest"] for b in measured if b["newest"]]
        deliveries += [b["at"] - b["id"] for b in measured]
        ids = sorted(b["id"] for b in measured)
        gaps += [b - a for a, b in itertools.pairwise(ids)]
    gaps.sort()
    window = row.get("_window") or (0.0, 0.0)
    made = sorted(c.at_ms for c in changes if window[0] <= c.at_ms <= window[1])
    spacing = sorted(b - a for a, b in itertools.pairwise(made))
    return {
        # How the moves were spread: evenly, or bunched by a late market maker?
        "change_spacing_ms": {
            "p10": quantile(spacing, 0.1),
            "p50": quantile(spacing, 0.5),
            "per_s": len(made) / max(1e-9, (window[1] - window[0]) / 1000),
        },
        "change_delay_ms": summary(delays) | {"unseen": unseen},
        "input_to_build_ms": summary(waits),
        "build_to_probe_ms": summary(deliveries),
        "publish_gap_ms": {
            "min": gaps[0] if gaps else None,
            "p50": quantile([float(g) for g in gaps], 0.5),
            "p90": quantile([float(g) for g in gaps], 0.9),
            "max": gaps[-1] if gaps else None,
            "gaps": len(gaps),
        },
    }


def start_web(env: dict[str, str], log: Path, cpus: str | None = None) -> tuple[Process, int]:
    """gunicorn with the project's settings on a free port (on ``cpus``), answering and settled."""
    port = free_port()
    web = Process(
        on_cpus([str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "-b", f"127.0.0.1:{port}",
                 "wsgi:app"], cpus), env, log,
    )  # fmt: skip
    for _ in range(100):
        try:
            if get(f"http://127.0.0.1:{port}/api/health", timeout=1)[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    time.sleep(2)  # both workers up and subscribed
    return web, port


def placement(pids: dict[str, list[int]]) -> dict[str, list[int]]:
    """The CPUs each named process may run on, as the kernel has them."""
    found: dict[str, list[int]] = {}
    for name, group in pids.items():
        cpus: set[int] = set()
        for pid in group:
            try:
                cpus |= os.sched_getaffinity(pid)
            except OSError:
                continue
        found[name] = sorted(cpus)
    return found


@dataclass
class Bench:
    """One run's fixed parts: options, accounts key, Redis, and where the service runs."""

    args: argparse.Namespace
    env: dict[str, str]
    key: str
    workdir: Path
    redis: RedisServer
    maker: MarketMaker | None
    placement: dict[str, list[int]] = field(default_factory=dict)  # as the last size found

    @property
    def server_cpus(self) -> str | None:
        """The CPUs of the service's processes (``--pinned``), or None: anywhere."""
        return SERVER_CPUS if self.args.pinned else None

    @property
    def since(self) -> str:
        """What the clients measure latency from: publication, or the newest input."""
        return "input" if self.args.source == "polymarket" else "publish"

    def sizes(
        self, symbols: str | None, label: str, windows: str | None = None
    ) -> list[dict[str, Any]]:
        """Every size of ``--clients`` (after a single client) on a refresher serving
        ``symbols`` (``SYMBOLS``; None: the default) and ``windows`` (``WINDOWS``; None: the
        default)."""
        args, workdir = self.args, self.workdir
        env = self.env | ({"SYMBOLS": symbols} if symbols else {})
        env |= {"WINDOWS": windows} if windows else {}
        served = tuple(span.name for span in parse_windows(windows or FIVE_MINUTES.name))
        flask = [str(BIN / "flask"), "--app", "wsgi"]
        refresher = Process(
            on_cpus([*flask, "refresher"], self.server_cpus),
            env,
            workdir / f"refresher-{label}.log",
        )
        rows: list[dict[str, Any]] = []
        web: Process | None = None
        try:
            for clients in [1, *args.clients]:
                # A fresh server per size: one run's closed streams, heap and sockets do
                # not weigh on the next, and the idle memory is a clean baseline.
                web, port = start_web(env, workdir / f"gunicorn-{label}-{clients}.log",
                                      self.server_cpus)  # fmt: skip
                proxy = Nginx(workdir, [port], args.nginx_workers) if args.via_nginx else None
                if proxy is not None:
                    port = proxy.port
                # A short warm-up, so "idle" is a worker that has served streams before (its
                # first stream's one-time allocations are not charged to every stream).
                run_clients(port, self.key, min(clients, 100), 2, web.pid, 1)
                time.sleep(1)
                idle = worker_rss_kb(web.pid)
                probes = min(args.probes, clients) if symbols else 0
                procs = max(1, min(args.client_procs, clients - probes))
                server = {
                    "refresher": [refresher.pid],
                    "gunicorn": [web.pid, *worker_pids(web.pid)],
                    "redis": [self.redis.process.pid] if self.redis.process else [],
                }
                self.placement = placement(server | {"bench": [os.getpid()]})
                row = run_clients(port, self.key, clients, args.seconds, web.pid, procs,
                                  self.since, probes, server, served,
                                  int(env.get("CLOCK_OFFSET_MS", "0")))  # fmt: skip
                row["symbols"] = (symbols or "default") + (f" x {windows}" if windows else "")
                row["windows"] = list(served)
                row["rss_idle_kb"] = idle
                row["kb_per_stream"] = (row["rss_loaded_kb"] - idle) / max(1, row["connected"])
                if row["_probed"] and self.maker is not None and symbols:
                    row |= coalescing(row, self.maker, {m.symbol for m in parse_symbols(symbols)})
                row.pop("_probed", None)
                row.pop("_window", None)
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
        return rows


def bench_clock(windows: str | None) -> OffsetClock:
    """The real clock, or with an hourly or 4-hour kind in ``windows`` one that reads a
    minute past the start of the Eastern 4-hour block holding now (also an hour's start)."""
    spans = parse_windows(windows) if windows else ()
    if not any(span.seconds >= 3600 for span in spans):
        return OffsetClock()
    return OffsetClock.reading(SPANS["4h"].start(time.time()) + 60)


def parse_args() -> argparse.Namespace:
    """The command line."""
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
    parser.add_argument("--changes-per-s", type=float, default=10.0, help="per market")
    parser.add_argument(
        "--via-nginx",
        action="store_true",
        help="clients connect through nginx with the repository's site config",
    )
    parser.add_argument("--nginx-workers", type=int, default=1)
    parser.add_argument(
        "--markets",
        help="e.g. BTC,ETH,SOL,XRP: every market's books moving; served as the first "
        "market alone (the baseline), then as all of them (implies --source polymarket)",
    )
    parser.add_argument(
        "--windows",
        help="e.g. 5m,15m (with --markets): every market's books of every window moving; "
        "served as the first window alone (the baseline), then as all of them, the clients "
        "and probes spread over the windows' streams",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="--markets: alternate the two this many times"
    )
    parser.add_argument(
        "--probes",
        type=int,
        default=8,
        help="--markets: clients (of each size) that read boards whole",
    )
    parser.add_argument(
        "--pinned",
        action="store_true",
        help=f"the service on CPU {SERVER_CPUS}, this script and the load on CPU {LOAD_CPUS}",
    )
    args = parser.parse_args()
    if args.markets:
        parse_symbols(args.markets)  # a bad list stops here, with the reason
        args.source = "polymarket"
    if args.windows:
        if not args.markets:
            parser.error("--windows needs --markets")
        parse_windows(args.windows)
    if args.pinned:
        wanted = {int(SERVER_CPUS), int(LOAD_CPUS)}
        if args.via_nginx:
            parser.error("--pinned does not place nginx: run it without --via-nginx")
        if not wanted <= os.sched_getaffinity(0) or shutil.which("taskset") is None:
            parser.error(f"--pinned needs taskset and CPUs {sorted(wanted)}")
    return args


def main() -> int:
    """Run the benchmark and print the table."""
    args = parse_args()
    if args.pinned:
        os.sched_setaffinity(0, {int(LOAD_CPUS)})  # children (load, probes) inherit it
    world = maker = None
    clock = OffsetClock()
    moved = [m.symbol for m in parse_symbols(args.markets)] if args.markets else ["BTC"]
    if args.source == "polymarket":
        # With the hourly or 4-hour kinds, every clock (the fakes', the service's through
        # CLOCK_OFFSET_MS, the clients') reads a minute past the start of the 4-hour block
        # that holds now, and the fakes' history reaches back 20 minutes: every refresher
        # latches each kind's price to beat from it (a real one runs across T0), so every
        # row has its P(up).
        clock = bench_clock(args.windows)
        world = FakePolymarket(auto_markets=True, clock=clock).start()
        for symbol in moved:
            world.rtds.live(period_s=1.0, symbol=MARKETS[symbol].chainlink)
        sides = ("up", "down") if args.markets else ("up",)
        spans = parse_windows(args.windows) if args.windows else (FIVE_MINUTES,)
        maker = MarketMaker(world, args.changes_per_s, moved, sides, spans)
    # --markets: the same world served as its first market alone, then as all of them;
    # --windows: as every market in its first window alone, then in all of them.
    configs: list[tuple[str | None, str | None]] = [(None, None)]
    if args.windows:
        first = args.windows.split(",")[0]
        configs = [(",".join(moved), first), (",".join(moved), args.windows)] * args.rounds
    elif args.markets:
        configs = [(moved[0], None), (",".join(moved), None)] * args.rounds

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="probboard-bench-stream-") as tmp:
        workdir = Path(tmp)
        redis = RedisServer(workdir, cpus=SERVER_CPUS if args.pinned else None)
        redis.start()
        env = service_env(
            REDIS_URL=redis.url,
            DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
            API_KEY_PEPPER="bench-pepper-0123456789",
            WEB_CONCURRENCY=str(args.workers),
            STREAM_MAX_PER_KEY="100000",
            # One key opens every stream: its account's per-minute limit would refuse most
            # of 1,000 opened within seconds (429), which is not what is measured here.
            VIP_PRO_RATE_LIMIT="10000000 per minute",
            TRACK_RECORD="false",
            **(world.env() if world is not None else {}),
            **clock.env(),
        )
        flask = [str(BIN / "flask"), "--app", "wsgi"]
        subprocess.run([*flask, "db", "upgrade"], env=env, cwd=ROOT, check=True,
                       capture_output=True)  # fmt: skip
        subprocess.run([*flask, "users", "create", "bench", "--plan", "vip_pro"], env=env,
                       cwd=ROOT, check=True, capture_output=True)  # fmt: skip
        created = subprocess.run([*flask, "keys", "create", "bench"], env=env, cwd=ROOT,
                                 check=True, capture_output=True, text=True)  # fmt: skip
        key = created.stdout.split()[-1]
        bench = Bench(args, env, key, workdir, redis, maker)
        if maker is not None:
            maker.start()
        try:
            for number, (symbols, windows) in enumerate(configs):
                if number:
                    redis.restart()  # each configuration on an empty bus
                label = f"{number}-{(symbols or 'default').replace(',', '-')}"
                label += f"-{windows.replace(',', '-')}" if windows else ""
                found = bench.sizes(symbols, label, windows)
                for row in found:  # the configurations alternate: baseline, then the many
                    row["baseline"] = number % 2 == 0
                rows += found
        finally:
            redis.stop()
            if maker is not None:
                maker.stop()
            if world is not None:
                world.stop()

    interval = int(env.get("PUBLISH_MIN_INTERVAL_MS", DEFAULT_MIN_INTERVAL_MS))
    report(args, rows, bench.placement, interval)
    return 0


def report(
    args: argparse.Namespace,
    rows: list[dict[str, Any]],
    cpus: dict[str, list[int]],
    min_interval_ms: int,
) -> None:
    """Print the tables and keep the figures in bench/results.json."""
    since = "input" if args.source == "polymarket" else "publish"
    via = "; through nginx (deploy/nginx-probboard.conf)" if args.via_nginx else ""
    where = "; " + ", ".join(f"{name} on CPUs {c}" for name, c in cpus.items())
    print(f"latency from {'each change at the fake CLOB' if since == 'input' else 'publication'}"
          f" to the client; source {args.source}{via}{where}")  # fmt: skip
    if args.markets:
        print(f"markets moving: {args.markets}, {args.changes_per_s:g} changes a second each "
              f"(UP's and DOWN's best bid in turn); PUBLISH_MIN_INTERVAL_MS "
              f"{min_interval_ms}")  # fmt: skip
    print(f"{'symbols':>24} {'clients':>7} {'conn':>5} {'err':>4} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'max ms':>7} {'deliv':>6} {'newest':>6} {'stall':>5} {'KB/strm':>7} "
          f"{'boards/s':>8}")  # fmt: skip
    for row in rows:
        lat = row["latency_ms"]
        print(
            f"{row['symbols']:>24} {row['clients']:>7} {row['connected']:>5} "
            f"{sum(row['errors'].values()):>4} {lat['p50']:>7.1f} {lat['p99']:>7.1f} "
            f"{lat['max']:>7.1f} {row['delivery']:>6.3f} {row['newest']:>6.3f} "
            f"{row['stalled']:>5} {row['kb_per_stream']:>7.1f} {row['boards_per_client_s']:>8.1f}"
        )
    if args.markets:
        report_markets(rows, min_interval_ms)
    else:
        baseline = rows[0]["latency_ms"]["p99"]
        for row in rows[1:]:
            print(f"p99 at {row['clients']} clients = {row['latency_ms']['p99'] / baseline:.1f}"
                  f" x the single-client p99 ({baseline:.1f} ms)")  # fmt: skip
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    name = "stream" if args.source == "simulated" else "stream_on_change"
    if args.markets:
        name = "stream_markets" + ("_windows" if args.windows else "")
    name += "_nginx" if args.via_nginx else ""
    name += "_pinned" if args.pinned else ""
    name += f"_interval{min_interval_ms}" if min_interval_ms != DEFAULT_MIN_INTERVAL_MS else ""
    results[name] = {"rows": rows, "settings": vars(args), "cpus": cpus}
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")


CPU_COLUMNS = ("refresher", "gunicorn", "redis", "load", "bench", "cpu0", "cpu1")


def report_markets(rows: list[dict[str, Any]], min_interval_ms: int) -> None:
    """The change delays, coalescing and CPU of each row, and many markets against one."""
    print("\nchange -> first board showing it (probes), gaps between published boards, CPU %")
    print(
        f"{'symbols':>24} {'clients':>7} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
        f"{'changes':>7} {'unseen':>6} {'gap min':>7} {'gap p50':>7} "
        + " ".join(f"{name:>9}" for name in CPU_COLUMNS)
    )
    for row in rows:
        delay, gap = row.get("change_delay_ms"), row.get("publish_gap_ms")
        if delay is None or gap is None:
            continue
        print(
            f"{row['symbols']:>24} {row['clients']:>7} {delay['p50']:>7.1f} {delay['p99']:>7.1f} "
            f"{delay['max']:>7.1f} {delay['samples']:>7} {delay['unseen']:>6} "
            f"{gap['min'] if gap['min'] is not None else '-':>7} {gap['p50']:>7.0f} "
            + " ".join(f"{row['cpu_pct'].get(name, float('nan')):>9.0f}" for name in CPU_COLUMNS)
        )
    print("\nthe probes' boards: newest input -> build (its id), build -> the probe")
    print(f"{'symbols':>24} {'clients':>7} {'wait p50':>8} {'wait p99':>8} {'deliv p50':>9} "
          f"{'deliv p99':>9}")  # fmt: skip
    for row in rows:
        wait, delivery = row.get("input_to_build_ms"), row.get("build_to_probe_ms")
        if wait is not None and delivery is not None:
            print(
                f"{row['symbols']:>24} {row['clients']:>7} {wait['p50']:>8.1f} "
                f"{wait['p99']:>8.1f} {delivery['p50']:>9.1f} {delivery['p99']:>9.1f}"
            )
    largest = max(row["clients"] for row in rows)
    alone = [r for r in rows if r["clients"] == largest and r["baseline"]]
    many = [r for r in rows if r["clients"] == largest and not r["baseline"]]
    for number, (base, row) in enumerate(zip(alone, many, strict=False), 1):
        print(f"round {number}, {largest} clients, {row['symbols']} against {base['symbols']}:")
        for what, name in (("latency_ms", "newestInputMs"), ("change_delay_ms", "per change")):
            b, m = base.get(what), row.get(what)
            if b is None or m is None:
                continue
            print(
                f"  {name:>13}: p50 {m['p50']:.1f} ms = {m['p50'] / b['p50']:.2f} x "
                f"({b['p50']:.1f} ms); p99 {m['p99']:.1f} ms = {m['p99'] / b['p99']:.2f} x "
                f"({b['p99']:.1f} ms)"
            )
        print(
            f"  boards per client per second {row['boards_per_client_s']:.1f} (alone "
            f"{base['boards_per_client_s']:.1f}; at most {1000 / min_interval_ms:.0f} with "
            f"PUBLISH_MIN_INTERVAL_MS {min_interval_ms}); smallest gap between two boards "
            f"{row['publish_gap_ms']['min']} ms (alone {base['publish_gap_ms']['min']} ms)"
        )


if __name__ == "__main__":
    sys.exit(main())
