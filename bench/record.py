"""The track record at scale: a year of four markets, scored per period, on PostgreSQL and SQLite.

For each store (a fresh PostgreSQL database on the local server, dropped afterwards, and an
SQLite file), the bench generates a year of windows of BTC, ETH, SOL and XRP
(``bench/record_data.py``: 420,480 windows, 3.78 million checkpoints), serves it with
gunicorn (the project's gunicorn.conf.py, ONE gevent worker, pinned to CPU 0) and measures:

- the time to answer ``/calibration?symbol=S&period=P`` for each period and market (the
  worker keeps no answer across requests: each one is computed), twice: the first requests,
  where ``all`` sums the closed months and keeps their sums (``app.calibration.kept``), then
  the same again, as every later answer is; the median and the slowest of the four markets.
  Target: ``all`` under 1 s on PostgreSQL (issue 36);
- the worker's resident memory before the first request and its peak (VmHWM) after all;
- ``/latest`` requests per second (wrk on CPU 1), without and with a client asking for
  ``period=all`` back to back during the run (the app is served by ``bench.record_app``,
  which never caches the record, so a computation is always running), in alternating
  rounds; the ratio is with / without, in the same run. On SQLite, the same again with
  the query run on the worker's hub (``BENCH_RECORD_ON_HUB=1``), as before
  ``app/calibration/native.py`` moved it to a native thread.

redis-server, the refresher (the simulated source, recording off), wrk and this script run
on CPU 1. The PostgreSQL server is the machine's own and runs where the scheduler puts it.
``--python-scoring`` also times today's way (every row loaded, scored in Python) on one
market, in a process of its own on CPU 0, for its time and peak memory.

    python -m bench.record [--days 365] [--stores postgresql,sqlite] [--seconds 8]
                           [--rounds 2] [--python-scoring] [--label record]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from app.calibration.periods import SPANS
from app.markets import parse_symbols
from bench.latest import Board, serve, wrk
from bench.record_data import batches, fill_postgres, fill_sqlite
from harness.databases import scratch_postgres_database
from harness.processes import BIN, ROOT, on_cpus, service_env
from harness.processes import http_get as get
from harness.spans import FIVE_MINUTES, window_start

RESULTS = ROOT / "bench" / "results.json"
SERVER_CPUS, LOAD_CPUS = "0", "1"
MARKETS = parse_symbols("BTC,ETH,SOL,XRP")
CALIBRATION = "/api/probboard/calibration"
LATEST = "/api/probboard/latest"
TARGET_S = 1.0  # ``all`` on PostgreSQL


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--days", type=int, default=365)
    parser.add_argument("--stores", default="postgresql,sqlite")
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument("--python-scoring", action="store_true")
    parser.add_argument("--label", default="record", help="its key in bench/results.json")
    parser.add_argument("--score-in-python", metavar="URL", help=argparse.SUPPRESS)
    return parser.parse_args()


@contextmanager
def _store(kind: str, workdir: Path) -> Iterator[str]:
    """A database URL of ``kind`` holding nothing yet (PostgreSQL's is dropped afterwards)."""
    if kind == "postgresql":
        with scratch_postgres_database() as url:
            yield url.replace("postgresql://", "postgresql+psycopg://", 1)
    else:
        with nullcontext(f"sqlite:///{workdir / 'record.sqlite3'}") as url:
            yield url


def _migrate(env: dict[str, str]) -> None:
    subprocess.run(
        [str(BIN / "flask"), "--app", "wsgi", "db", "upgrade"],
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
    )


def _fill(kind: str, url: str, end: int, days: int) -> dict[str, float]:
    """Generate and write the record; its size and how long writing took."""
    started = time.monotonic()
    data = batches(MARKETS, end, days)
    if kind == "postgresql":
        plain = url.replace("postgresql+psycopg://", "postgresql://", 1)
        written = fill_postgres(plain, data)
        size = _postgres_size(plain)
    else:
        path = url.removeprefix("sqlite:///")
        written = fill_sqlite(path, data)
        size = os.path.getsize(path)
    return {"checkpoints": written, "fill_s": time.monotonic() - started, "bytes": size}


def _postgres_size(url: str) -> int:
    import psycopg

    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
    return int(row[0]) if row else 0


def _worker(master: int) -> int:
    children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
    return int(children[0])


def _memory_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def _timed_get(url: str) -> float:
    started = time.monotonic()
    status, _, body = get(url, timeout=300)
    elapsed = time.monotonic() - started
    if status != 200:
        raise RuntimeError(f"{url}: {status} {body[:300]!r}")
    return elapsed


def _periods(port: int) -> dict[str, list[float]]:
    """Seconds to the first answer of each (period, market)."""
    times: dict[str, list[float]] = {name: [] for name in SPANS}
    for name in SPANS:
        for market in MARKETS:
            url = f"http://127.0.0.1:{port}{CALIBRATION}?symbol={market.symbol}&period={name}"
            times[name].append(_timed_get(url))
    return times


def _throughput(port: int, args: argparse.Namespace) -> dict[str, Any]:
    """/latest's rate without and with the record computed back to back, alternating."""
    latest = f"http://127.0.0.1:{port}{LATEST}"
    record = f"http://127.0.0.1:{port}{CALIBRATION}?symbol=BTC&period=all"
    wrk(latest, 2, args.connections, cpus=LOAD_CPUS)  # warm up
    runs: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    computed: list[float] = []
    for _ in range(args.rounds):
        runs["without"].append(wrk(latest, args.seconds, args.connections, cpus=LOAD_CPUS))
        stop = threading.Event()

        def ask(stop: threading.Event = stop) -> None:
            while not stop.is_set():
                computed.append(_timed_get(record))

        asker = threading.Thread(target=ask, daemon=True)
        asker.start()
        runs["with"].append(wrk(latest, args.seconds, args.connections, cpus=LOAD_CPUS))
        stop.set()
        asker.join()
    rps = {name: statistics.median(r["rps"] for r in found) for name, found in runs.items()}
    return {
        "runs": runs,
        "rps": rps,
        "ratio": rps["with"] / rps["without"],
        "computations": len(computed),
        "computation_median_s": statistics.median(computed) if computed else None,
    }


def _python_scoring(url: str, env: dict[str, str]) -> dict[str, float]:
    """Today's way on one market, in a process of its own on CPU 0: time and peak memory."""
    argv = [str(BIN / "python"), "-m", "bench.record", "--score-in-python", url]
    done = subprocess.run(
        on_cpus(argv, SERVER_CPUS), env=env, cwd=ROOT, check=True, capture_output=True, text=True
    )
    found: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def _score_in_python(url: str) -> int:
    """(Run by ``_python_scoring``.) store.load, BTC's windows, summary.summarize."""
    from sqlalchemy import create_engine

    from app.calibration import store, summary

    engine = create_engine(url)
    started = time.monotonic()
    with engine.connect() as conn:
        loaded = store.load(conn, "simulated")
    load_s = time.monotonic() - started
    mine = [w for w in loaded if str(w["slug"]).startswith(MARKETS[0].slug(0, FIVE_MINUTES)[:-1])]
    summary.summarize(mine)
    total_s = time.monotonic() - started
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"load_s": load_s, "total_s": total_s, "peak_mib": peak_kib / 1024}))
    return 0


def _measure_store(
    kind: str, board: Board, workdir: Path, end: int, args: argparse.Namespace
) -> dict[str, Any]:
    with _store(kind, workdir) as url:
        env = board.env | {"DATABASE_URL": url}
        _migrate(env)
        filled = _fill(kind, url, end, args.days)
        written, seconds, mib = filled["checkpoints"], filled["fill_s"], filled["bytes"] / 2**20
        print(f"{kind}: {written:,.0f} checkpoints in {seconds:.0f} s, {mib:.0f} MiB", flush=True)
        result: dict[str, Any] = {"store": filled}
        if args.python_scoring:
            result["python_scoring"] = _python_scoring(url, env)
        process, port = serve("bench.record_app:app", env, workdir, kind, SERVER_CPUS)
        try:
            worker = _worker(process.pid)
            get(f"http://127.0.0.1:{port}{LATEST}")
            rss_before = _memory_kib(worker, "VmRSS")
            result["periods_s"] = _periods(port)  # the first: keeps the closed months' sums
            result["periods_again_s"] = _periods(port)  # every later answer
            result["rss_mib"] = {
                "before": rss_before / 1024,
                "peak": _memory_kib(worker, "VmHWM") / 1024,
            }
            result["latest"] = _throughput(port, args)
        finally:
            process.stop()
        if kind == "sqlite":  # the same, SQLite's query on the worker's hub (as before)
            on_hub = env | {"BENCH_RECORD_ON_HUB": "1"}
            process, port = serve("bench.record_app:app", on_hub, workdir, "hub", SERVER_CPUS)
            try:
                result["latest_on_hub"] = _throughput(port, args)
            finally:
                process.stop()
    return result


def _report(results: dict[str, Any], args: argparse.Namespace) -> None:
    for kind, found in results.items():
        print(
            f"\n{kind}: seconds to answer, median / slowest of the four markets: the first"
            " answer (it keeps the closed months' sums), then every later one"
        )
        for name, times in found["periods_s"].items():
            again = found["periods_again_s"][name]
            print(
                f"  {name:>4}: {statistics.median(times):7.3f} / {max(times):7.3f}"
                f"   then {statistics.median(again):7.3f} / {max(again):7.3f}"
            )
        rss = found["rss_mib"]
        print(f"  worker RSS: {rss['before']:.0f} MiB before, peak {rss['peak']:.0f} MiB")
        latest = found["latest"]
        print(
            f"  /latest: {latest['rps']['without']:.0f} req/s without, "
            f"{latest['rps']['with']:.0f} with the record computed "
            f"({latest['computations']} computations, median "
            f"{latest['computation_median_s'] or 0:.3f} s): ratio {latest['ratio']:.2f}"
        )
        if "latest_on_hub" in found:
            hub = found["latest_on_hub"]
            print(
                f"  /latest, the query on the hub: {hub['rps']['without']:.0f} req/s without, "
                f"{hub['rps']['with']:.0f} with ({hub['computations']} computations): "
                f"ratio {hub['ratio']:.2f}"
            )
        if "python_scoring" in found:
            old = found["python_scoring"]
            print(
                f"  today's Python scoring of BTC: {old['total_s']:.1f} s "
                f"(loading {old['load_s']:.1f} s), peak {old['peak_mib']:.0f} MiB"
            )
    if "postgresql" in results:
        for label, key in (("first answer", "periods_s"), ("later answers", "periods_again_s")):
            worst = max(results["postgresql"][key]["all"])
            verdict = "met" if worst < TARGET_S else "MISSED"
            print(
                f"'all' on PostgreSQL, {label}, slowest market: {worst:.3f} s"
                f" (target < 1 s: {verdict})"
            )
    print(
        f"{args.days} days x {len(MARKETS)} markets; gunicorn 1 gevent worker on CPU "
        f"{SERVER_CPUS}; redis, refresher, wrk -t2 -c{args.connections} and this script on "
        f"CPU {LOAD_CPUS}; {args.rounds} rounds of {args.seconds} s"
    )


def main() -> int:
    """Generate, serve and measure each store; print the table, keep it in results.json."""
    args = _arguments()
    if args.score_in_python:
        return _score_in_python(args.score_in_python)
    os.sched_setaffinity(0, {int(LOAD_CPUS)})  # this script stays off the server's core
    end = window_start(time.time())
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="probboard-bench-record-") as tmp:
        workdir = Path(tmp)
        unlimited = "10000000 per minute"
        env = service_env(
            WEB_CONCURRENCY="1",
            SYMBOLS=",".join(m.symbol for m in MARKETS),
            TRACK_RECORD="false",  # the refresher only publishes boards for /latest
            DB_TIMEOUT_MS="60000",  # the time measured is the computation's, never a 503
            GUEST_RATE_LIMIT=unlimited,
            DATABASE_URL=f"sqlite:///{workdir / 'unused.sqlite3'}",
        )
        board = Board(workdir / "board", env, LOAD_CPUS)
        try:
            for kind in args.stores.split(","):
                results[kind] = _measure_store(kind, board, workdir, end, args)
        finally:
            board.stop()
    _report(results, args)
    kept = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    kept[args.label] = {"results": results, "settings": vars(args) | {"end": end}}
    RESULTS.write_text(json.dumps(kept, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
