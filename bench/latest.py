"""Requests per second of /api/probboard/latest against a bare Flask route, in one run.

Both are served by gunicorn with the project's gunicorn.conf.py (gevent workers, the same
WEB_CONCURRENCY) and loaded with wrk from the same machine, interleaved over several rounds;
the report is the median of each, and the ratio latest / bare.

Two modes:

- ordinary (the default): 2 workers, and gunicorn, redis-server, the refresher and wrk
  share every core as the scheduler likes;
- ``--pinned``: ONE worker; gunicorn (master and worker) under ``taskset -c 0``, and
  redis-server, the refresher, wrk and this script under ``taskset -c 1``, so the server's
  core does nothing but serve. The bare baseline is served and loaded the same way.

The figures go to bench/results.json: ``latest`` (ordinary) and ``latest_pinned``.

    python -m bench.latest [--pinned] [--seconds 8] [--rounds 2] [--connections 64]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from harness.processes import (
    BIN,
    ROOT,
    Process,
    RedisServer,
    free_port,
    on_cpus,
    service_env,
    wait_until,
)
from harness.processes import http_get as get

RESULTS = ROOT / "bench" / "results.json"
SERVER_CPUS = "0"  # --pinned: gunicorn
LOAD_CPUS = "1"  # --pinned: redis-server, the refresher, wrk (and this script)


def wrk(
    url: str,
    seconds: int,
    connections: int,
    headers: dict[str, str] | None = None,
    cpus: str | None = None,
) -> dict[str, float]:
    """Run wrk (on ``cpus`` if given) and return requests/s and p50/p99 latency in ms."""
    header_args = [arg for k, v in (headers or {}).items() for arg in ("-H", f"{k}: {v}")]
    argv = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", *header_args, url]
    out = subprocess.run(on_cpus(argv, cpus), check=True, capture_output=True, text=True).stdout

    def latency(label: str) -> float:
        match = re.search(rf"^\s+{label}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if not match:
            raise RuntimeError(f"wrk output without {label}%:\n{out}")
        value, unit = float(match.group(1)), match.group(2)
        return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value

    rps = re.search(r"Requests/sec:\s+([\d.]+)", out)
    errors = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    if not rps:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    return {
        "rps": float(rps.group(1)),
        "p50_ms": latency("50"),
        "p99_ms": latency("99"),
        "non_2xx": float(errors.group(1)) if errors else 0.0,
    }


def serve(
    app_path: str, env: dict[str, str], workdir: Path, name: str, cpus: str | None = None
) -> tuple[Process, int]:
    """gunicorn -c gunicorn.conf.py serving ``app_path`` (on ``cpus``); waits until it answers."""
    port = free_port()
    argv = [str(BIN / "gunicorn"), "-c", "gunicorn.conf.py", "-b", f"127.0.0.1:{port}", app_path]
    process = Process(on_cpus(argv, cpus), env, workdir / f"{name}.log")
    ok = wait_until(lambda: _answers(port), timeout=30)
    if not ok:
        process.stop()
        raise RuntimeError(f"{name} did not start:\n{process.output()}")
    return process, port


def _answers(port: int) -> bool:
    try:
        return get(f"http://127.0.0.1:{port}/api/health", timeout=1)[0] in (200, 404)
    except OSError:
        return False


def _affinities(pid: int) -> set[int]:
    """The CPUs of ``pid`` and of every process below it (gunicorn's master and workers)."""
    found = set(os.sched_getaffinity(pid))
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        for child in children.read_text().split():
            found |= _affinities(int(child))
    return found


def main() -> int:
    """Run the comparison and print the table."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--connections", type=int, default=64)
    parser.add_argument(
        "--workers", type=int, default=None, help="gunicorn workers (default 2; 1 with --pinned)"
    )
    parser.add_argument(
        "--pinned",
        action="store_true",
        help=f"one worker on CPU {SERVER_CPUS}; redis-server, refresher and wrk on CPU {LOAD_CPUS}",
    )
    args = parser.parse_args()
    if args.workers is None:
        args.workers = 1 if args.pinned else 2
    if shutil.which("wrk") is None:
        print("bench: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    server_cpus = load_cpus = None
    if args.pinned:
        wanted = {int(SERVER_CPUS), int(LOAD_CPUS)}
        if not wanted <= os.sched_getaffinity(0) or shutil.which("taskset") is None:
            print(
                f"bench: --pinned needs taskset and CPUs {sorted(wanted)} "
                f"(this process may run on {sorted(os.sched_getaffinity(0))})",
                file=sys.stderr,
            )
            return 2
        server_cpus, load_cpus = SERVER_CPUS, LOAD_CPUS
        os.sched_setaffinity(0, {int(LOAD_CPUS)})  # this script stays off the server's core

    with tempfile.TemporaryDirectory(prefix="probboard-bench-") as tmp:
        workdir = Path(tmp)
        redis = RedisServer(workdir, cpus=load_cpus)
        redis.start()
        unlimited = "10000000 per minute"  # the limiter runs (in Redis) but never refuses
        env = service_env(
            REDIS_URL=redis.url,
            WEB_CONCURRENCY=str(args.workers),
            DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
            API_KEY_PEPPER="bench-pepper-0123456789",
            GUEST_RATE_LIMIT=unlimited,
            VIP_PRO_RATE_LIMIT=unlimited,
            USER_RATE_LIMIT=unlimited,
        )
        key, token = _accounts(env)
        # The refresher's own program, as in production (scripts/serve.sh, the systemd unit).
        refresher = Process(
            on_cpus([str(BIN / "python"), "-m", "app.refresher"], load_cpus),
            env,
            workdir / "refresher.log",
        )
        try:
            probe, probe_port = serve("wsgi:app", env, workdir, "probe", server_cpus)
            if not wait_until(lambda: b'"items":[{' in _latest_body(probe_port), timeout=30):
                raise RuntimeError(f"no board arrived:\n{refresher.output()}")
            body = _latest_body(probe_port)
            placement = {
                "gunicorn": sorted(_affinities(probe.pid)),
                "redis-server": sorted(os.sched_getaffinity(redis.process.pid))
                if redis.process
                else [],
                "refresher": sorted(os.sched_getaffinity(refresher.pid)),
                "bench": sorted(os.sched_getaffinity(0)),
            }
            probe.stop()
            env["BARE_BODY_BYTES"] = str(len(body))
            latest = "/api/probboard/latest"
            targets: dict[str, tuple[str, str, dict[str, str]]] = {
                "bare": ("bench.bare_app:app", "/bare", {}),
                "bare+headers": ("bench.bare_app:app", "/bare-headers", {}),
                "guest": ("wsgi:app", latest, {}),
                "vip_pro key": ("wsgi:app", latest, {"X-API-Key": key}),
                "session": ("wsgi:app", latest, {"Cookie": f"probboard_session={token}"}),
            }
            runs: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
            for round_no in range(args.rounds):
                for name, (app_path, path, headers) in targets.items():
                    process, port = serve(
                        app_path, env, workdir, f"{round_no}-{name[:5]}", server_cpus
                    )
                    url = f"http://127.0.0.1:{port}{path}"
                    try:
                        wrk(url, 2, args.connections, headers, load_cpus)  # warm up
                        runs[name].append(
                            wrk(url, args.seconds, args.connections, headers, load_cpus)
                        )
                    finally:
                        process.stop()
        finally:
            refresher.stop()
            redis.stop()

    summary = {
        name: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for name, results in runs.items()
    }
    ratios = {name: row["rps"] / summary["bare"]["rps"] for name, row in summary.items()}
    mode = "pinned" if args.pinned else "ordinary"
    print(f"{'caller':<13} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'ratio':>6}")
    for name, row in summary.items():
        print(
            f"{name:<13} {row['rps']:>9.0f} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
            f"{row['non_2xx']:>8.0f} {ratios[name]:>6.2f}"
        )
    print(
        f"{mode}: body {len(body)} bytes, {args.workers} gevent worker(s), "
        f"wrk -t2 -c{args.connections}, {args.rounds} rounds of {args.seconds} s; CPUs "
        + ", ".join(f"{name} {cpus}" for name, cpus in placement.items())
    )
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    results["latest_pinned" if args.pinned else "latest"] = {
        "summary": summary,
        "ratio_to_bare": ratios,
        "runs": runs,
        "settings": vars(args) | {"body_bytes": len(body), "mode": mode, "cpus": placement},
    }
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _accounts(env: dict[str, str]) -> tuple[str, str]:
    """Migrate the bench database; a vip_pro key and a user session for the keyed runs."""
    flask = [str(BIN / "flask"), "--app", "wsgi"]

    def cli(*args: str) -> str:
        done = subprocess.run(
            [*flask, *args], env=env, cwd=ROOT, check=True, capture_output=True, text=True
        )
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    cli("db", "upgrade")
    cli("users", "create", "benchvip", "--plan", "vip_pro")
    cli("users", "create", "benchuser", "--plan", "user")
    return cli("keys", "create", "benchvip"), cli("sessions", "create", "benchuser")


def _latest_body(port: int) -> bytes:
    try:
        return get(f"http://127.0.0.1:{port}/api/probboard/latest", timeout=2)[2]
    except OSError:
        return b""


if __name__ == "__main__":
    sys.exit(main())
