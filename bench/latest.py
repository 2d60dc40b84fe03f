"""Requests per second of /api/probboard/latest against a baseline served in the same run.

Everything is served by gunicorn with the project's gunicorn.conf.py (gevent workers, the
same WEB_CONCURRENCY) and loaded with wrk from the same machine, interleaved over several
rounds; the report is the median of each, and its ratio to the baseline (the first row).

What is compared:

- callers (the default): ``/latest`` for a guest, a vip_pro key and a session against a bare
  Flask route answering a constant body of the board's size (``bench/bare_app.py``);
- ``--symbols``: ``/latest`` for the vip_pro key with ``SYMBOLS=BTC`` (one row, the
  baseline) and with ``SYMBOLS=BTC,ETH,SOL,XRP`` (four rows). Each board has its own
  redis-server and refresher (the simulated source), both running for the whole run;
  issue 28 asks for four rows at >= 0.90 of the one-row rate;
- ``--windows [LIST]``: ``/latest`` for the vip_pro key on the four markets with
  ``WINDOWS=5m`` (the baseline) and with ``WINDOWS=LIST`` (default ``5m,15m``; the default
  board, then each other window's ``?window=``); issues 39 and 49 ask for the default board
  at >= 0.90 of the one-window rate (``--windows 5m,15m,1h,4h``: four kinds).

Two placements:

- ordinary (the default): 2 workers, and gunicorn, redis-server, the refresher and wrk
  share every core as the scheduler likes;
- ``--pinned``: ONE worker; gunicorn (master and worker) under ``taskset -c 0``, and
  redis-server, the refresher, wrk and this script under ``taskset -c 1``, so the server's
  core does nothing but serve. The baseline is served and loaded the same way.

The figures go to bench/results.json: ``latest`` (ordinary), ``latest_pinned``,
``latest_symbols``, ``latest_windows`` and their ``_pinned`` forms.

    python -m bench.latest [--pinned] [--symbols | --windows] [--seconds 8] [--rounds 2]
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
from typing import NamedTuple

from app.markets import parse_windows
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
LATEST = "/api/probboard/latest"
ONE_ROW, FOUR_ROWS = "BTC", "BTC,ETH,SOL,XRP"  # --symbols
FOUR_ROW_TARGET = 0.90  # issue 28, point 5: four rows within 10 % of one
ONE_WINDOW, TWO_WINDOWS = "5m", "5m,15m"  # --windows (on FOUR_ROWS)
TWO_WINDOW_TARGET = 0.90  # issue 39, point 6: two windows within 10 % of one


class Target(NamedTuple):
    """One thing to load: the WSGI app, the path, the request headers and the server's env."""

    app_path: str
    path: str
    headers: dict[str, str]
    env: dict[str, str]


class Board:
    """A redis-server and the refresher publishing to it (its own program, as in production)."""

    def __init__(self, workdir: Path, env: dict[str, str], cpus: str | None) -> None:
        workdir.mkdir(exist_ok=True)
        self.redis = RedisServer(workdir, cpus=cpus)
        self.redis.start()
        self.env = env | {"REDIS_URL": self.redis.url}
        self.refresher = Process(
            on_cpus([str(BIN / "python"), "-m", "app.refresher"], cpus),
            self.env,
            workdir / "refresher.log",
        )

    def stop(self) -> None:
        """Stop the refresher, then its redis-server."""
        self.refresher.stop()
        self.redis.stop()

    def placement(self) -> dict[str, list[int]]:
        """The CPUs this board's processes really have."""
        redis = self.redis.process
        return {
            "redis-server": sorted(os.sched_getaffinity(redis.pid)) if redis else [],
            "refresher": sorted(os.sched_getaffinity(self.refresher.pid)),
        }


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


def _arguments() -> argparse.Namespace:
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
    parser.add_argument(
        "--symbols",
        action="store_true",
        help=f"a vip_pro key on SYMBOLS={FOUR_ROWS} against SYMBOLS={ONE_ROW}, instead of callers",
    )
    parser.add_argument(
        "--windows",
        nargs="?",
        const=TWO_WINDOWS,
        help=f"a vip_pro key on WINDOWS=LIST (default {TWO_WINDOWS}) against "
        f"WINDOWS={ONE_WINDOW} (SYMBOLS={FOUR_ROWS}), instead of callers",
    )
    args = parser.parse_args()
    if args.symbols and args.windows:
        parser.error("--symbols and --windows are two comparisons: one at a time")
    if args.workers is None:
        args.workers = 1 if args.pinned else 2
    return args


def main() -> int:
    """Run the comparison, print the table and keep it in bench/results.json."""
    args = _arguments()
    # --windows: the served windows' board ("4x2" for 5m,15m), each window beyond the first
    # also asked by ?window= (the first is the default board).
    served = [span.name for span in parse_windows(args.windows)] if args.windows else []
    many, others = f"4x{len(served)}", served[1:]
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
        unlimited = "10000000 per minute"  # the limiter runs (in Redis) but never refuses
        env = service_env(
            WEB_CONCURRENCY=str(args.workers),
            DATABASE_URL=f"sqlite:///{workdir / 'bench.sqlite3'}",
            API_KEY_PEPPER="bench-pepper-0123456789",
            GUEST_RATE_LIMIT=unlimited,
            VIP_PRO_RATE_LIMIT=unlimited,
            USER_RATE_LIMIT=unlimited,
        )
        layouts: dict[str, dict[str, str]]
        if args.symbols or args.windows:
            # Two refreshers would write the same BTC windows to one database: no track record.
            env["TRACK_RECORD"] = "false"
        if args.symbols:
            layouts = {"1 row": {"SYMBOLS": ONE_ROW}, "4 rows": {"SYMBOLS": FOUR_ROWS}}
        elif args.windows:
            layouts = {
                "4x1": {"SYMBOLS": FOUR_ROWS, "WINDOWS": ONE_WINDOW},
                many: {"SYMBOLS": FOUR_ROWS, "WINDOWS": args.windows},
            }
        else:
            layouts = {"board": {"SYMBOLS": env.get("SYMBOLS", ONE_ROW)}}
        boards: dict[str, Board] = {}
        try:
            for name, settings in layouts.items():
                layout_env = env | settings
                boards[name] = Board(workdir / name.replace(" ", "-"), layout_env, load_cpus)
            key, token = _accounts(next(iter(boards.values())).env)
            bodies: dict[str, int] = {}
            gunicorn_cpus: set[int] = set()
            for name, board in boards.items():
                body, cpus = _probe(board, workdir, server_cpus)
                bodies[name] = len(body)
                gunicorn_cpus |= cpus
            placement = {"gunicorn": sorted(gunicorn_cpus)}
            for name, board in boards.items():
                suffix = f" ({name})" if len(boards) > 1 else ""
                placement |= {f"{k}{suffix}": v for k, v in board.placement().items()}
            placement["bench"] = sorted(os.sched_getaffinity(0))
            if args.symbols or args.windows:
                targets = {
                    f"key, {name}": Target("wsgi:app", LATEST, {"X-API-Key": key}, board.env)
                    for name, board in boards.items()
                }
            for window in others:
                targets[f"key, {many} {window}"] = Target(
                    "wsgi:app", f"{LATEST}?window={window}", {"X-API-Key": key}, boards[many].env
                )
            if not args.symbols and not args.windows:
                targets = _caller_targets(boards["board"].env, bodies["board"], key, token)
            runs = _measure(targets, args, workdir, server_cpus, load_cpus)
        finally:
            for board in boards.values():
                board.stop()

    summary = {
        name: {key: statistics.median(r[key] for r in results) for key in results[0]}
        for name, results in runs.items()
    }
    baseline = next(iter(summary.values()))["rps"]
    ratios = {name: row["rps"] / baseline for name, row in summary.items()}
    mode = "pinned" if args.pinned else "ordinary"
    print(f"{'caller':<14} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'ratio':>6}")
    for name, row in summary.items():
        print(
            f"{name:<14} {row['rps']:>9.0f} {row['p50_ms']:>8.2f} {row['p99_ms']:>8.2f} "
            f"{row['non_2xx']:>8.0f} {ratios[name]:>6.2f}"
        )
    sizes = ", ".join(
        f"{name} {size} bytes" if len(bodies) > 1 else f"{size} bytes"
        for name, size in bodies.items()
    )
    print(
        f"{mode}: body {sizes}, {args.workers} gevent worker(s), "
        f"wrk -t2 -c{args.connections}, {args.rounds} rounds of {args.seconds} s; CPUs "
        + ", ".join(f"{name} {cpus}" for name, cpus in placement.items())
    )
    if args.symbols:
        ratio = ratios["key, 4 rows"]
        verdict = "met" if ratio >= FOUR_ROW_TARGET else "MISSED"
        print(f"4 rows / 1 row: {ratio:.3f} (target >= {FOUR_ROW_TARGET:.2f}: {verdict})")
    if args.windows:
        for name in (f"key, {many}", *(f"key, {many} {window}" for window in others)):
            verdict = "met" if ratios[name] >= TWO_WINDOW_TARGET else "MISSED"
            target = f"target >= {TWO_WINDOW_TARGET:.2f}"
            print(f"{name} / 4x1: {ratios[name]:.3f} ({target}: {verdict})")
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    label = "latest_symbols" if args.symbols else "latest_windows" if args.windows else "latest"
    results[f"{label}_pinned" if args.pinned else label] = {
        "summary": summary,
        "ratio_to_baseline" if args.symbols or args.windows else "ratio_to_bare": ratios,
        "runs": runs,
        "settings": vars(args)
        | {"body_bytes": bodies if args.symbols or args.windows else bodies["board"]}
        | {"mode": mode, "cpus": placement},
    }
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


def _caller_targets(
    env: dict[str, str], body_bytes: int, key: str, token: str
) -> dict[str, Target]:
    """The bare baselines, then /latest for a guest, the vip_pro key and the session."""
    bare_env = env | {"BARE_BODY_BYTES": str(body_bytes)}
    return {
        "bare": Target("bench.bare_app:app", "/bare", {}, bare_env),
        "bare+headers": Target("bench.bare_app:app", "/bare-headers", {}, bare_env),
        "guest": Target("wsgi:app", LATEST, {}, env),
        "vip_pro key": Target("wsgi:app", LATEST, {"X-API-Key": key}, env),
        "session": Target("wsgi:app", LATEST, {"Cookie": f"probboard_session={token}"}, env),
    }


def _measure(
    targets: dict[str, Target],
    args: argparse.Namespace,
    workdir: Path,
    server_cpus: str | None,
    load_cpus: str | None,
) -> dict[str, list[dict[str, float]]]:
    """Each target on a freshly started gunicorn, interleaved, ``args.rounds`` times."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    for round_no in range(args.rounds):
        for name, target in targets.items():
            log_name = f"{round_no}-{re.sub(r'[^a-z0-9]+', '-', name)}"
            process, port = serve(target.app_path, target.env, workdir, log_name, server_cpus)
            url = f"http://127.0.0.1:{port}{target.path}"
            try:
                wrk(url, 2, args.connections, target.headers, load_cpus)  # warm up
                runs[name].append(
                    wrk(url, args.seconds, args.connections, target.headers, load_cpus)
                )
            finally:
                process.stop()
    return runs


def _probe(board: Board, workdir: Path, cpus: str | None) -> tuple[bytes, set[int]]:
    """A /latest body once the board has all its rows, and the CPUs gunicorn ran on."""
    rows = len(board.env["SYMBOLS"].split(","))
    name = f"probe-{rows}-{board.env.get('WINDOWS', 'default').replace(',', '-')}"
    process, port = serve("wsgi:app", board.env, workdir, name, cpus)
    try:
        if not wait_until(lambda: _rows(_latest_body(port)) == rows, timeout=30):
            raise RuntimeError(f"no board of {rows} rows arrived:\n{board.refresher.output()}")
        return _latest_body(port), _affinities(process.pid)
    finally:
        process.stop()


def _rows(body: bytes) -> int:
    try:
        return len(json.loads(body)["items"])
    except (ValueError, KeyError, TypeError):
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
        return get(f"http://127.0.0.1:{port}{LATEST}", timeout=2)[2]
    except OSError:
        return b""


if __name__ == "__main__":
    sys.exit(main())
