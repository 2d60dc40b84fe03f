"""The whole production shape on one machine, on loopback: ``python -m harness.cluster``.

Redis Sentinel (a primary, two replicas, three sentinels), two web hosts (gunicorn with
gevent workers), a refresher beside each (one leads), nginx in front with the repository's
site, and a vip_pro key. It prints where everything is and how to kill each part, then runs
until Ctrl-C and stops everything it started.

``--drill`` kills the leading refresher, the Redis primary and a web host one after another
while a guest polls and a stream client (reconnecting with Last-Event-ID) listens through
nginx, then reports what they saw; exit status 0 when nothing was lost.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness.accounts import TEST_PEPPER, create_user, issue_key, migrated
from harness.failover_clients import (
    BusRecorder,
    Poller,
    ResumingStream,
    interleaved,
    never_back,
    strictly_increasing,
)
from harness.nginx import Nginx
from harness.processes import Process, Service, service_env, wait_until
from harness.sentinel import SentinelGroup

HOSTS = ("vm1", "vm2")
PAUSE_S = 6.0  # between the drill's kills


@dataclass
class Cluster:
    """What ``start`` started."""

    group: SentinelGroup
    hosts: dict[str, Service]
    nginx: Nginx
    key: str

    def refreshers(self) -> dict[str, Process]:
        """Each host's refresher."""
        return {name: host.refresher for name, host in self.hosts.items() if host.refresher}

    def stop(self) -> None:
        """Stop every process, by pid."""
        self.nginx.stop()
        for host in self.hosts.values():
            host.stop()
        self.group.stop()


def start(workdir: Path, database_url: str | None) -> Cluster:
    """Start everything under ``workdir``; the database is ``database_url`` or SQLite there."""
    group = SentinelGroup(workdir / "redis")
    group.start()
    url = database_url or f"sqlite:///{workdir / 'probboard.sqlite3'}"
    accounts = migrated(url)
    create_user(accounts, "drill", "vip_pro")
    key = issue_key(accounts, "drill")
    env = service_env(
        REDIS_URL=group.url,
        DATABASE_URL=url,
        API_KEY_PEPPER=TEST_PEPPER,
        BOARD_SOURCE=os.environ.get("BOARD_SOURCE", "simulated"),
        TRUSTED_PROXIES="127.0.0.1/32,::1/128",  # nginx: the one proxy, on loopback
        TRACK_RECORD="false",
    )
    hosts: dict[str, Service] = {}
    for name in HOSTS:
        folder = workdir / name
        folder.mkdir(parents=True, exist_ok=True)
        hosts[name] = host = Service(folder, env)
        host.start_web(workers=2)
        host.start_refresher()
    (workdir / "nginx").mkdir(exist_ok=True)
    nginx = Nginx(workdir / "nginx", [host.port for host in hosts.values()])
    return Cluster(group, hosts, nginx, key)


def describe(cluster: Cluster) -> str:
    """Where everything is, and how to kill each part."""
    base = cluster.nginx.base
    lines = [
        f"nginx (the load balancer):  {base}",
        *(
            f"web host {name}: gunicorn pid {host.web.pid if host.web else '-'} on {host.base}, "
            f"refresher pid {host.refresher.pid if host.refresher else '-'}"
            for name, host in cluster.hosts.items()
        ),
        f"Redis: primary 127.0.0.1:{cluster.group.primary_port()}, replicas and sentinels "
        f"in REDIS_URL={cluster.group.url}",
        f"a vip_pro key: {cluster.key}",
        "",
        "Try:",
        f"  curl -N -H 'X-API-Key: {cluster.key}' {base}/api/probboard/stream",
        f"  watch -n 0.5 curl -s {base}/api/probboard/latest",
        f"  REDIS_URL='{cluster.group.url}' SECRET_KEY=x .venv/bin/python -m app.refresher "
        "--who-leads",
        "  kill -9 <the leading refresher's pid>      (a standby publishes within 2 s)",
        "  kill -9 <the primary redis-server's pid>    (the sentinels promote a replica)",
        "  kill -9 <a gunicorn pid and its workers>   (nginx sends traffic to the other host)",
    ]
    return "\n".join(lines)


def _leader(cluster: Cluster, recorder: BusRecorder) -> tuple[str, Process]:
    name = recorder.boards[-1][1] or ""
    for host, process in cluster.refreshers().items():
        if name.endswith(f":{process.pid}"):
            return host, process
    raise RuntimeError(f"no refresher of this cluster is {name!r}")


def drill(cluster: Cluster) -> int:
    """Kill the leader, the Redis primary and a web host in turn; report; 0 when whole."""
    base, port = cluster.nginx.base, cluster.nginx.port
    recorder = BusRecorder(cluster.group.url)
    if not wait_until(lambda: len(recorder.boards) >= 2, timeout=30):
        print("no boards on the bus", file=sys.stderr)
        return 1
    poller, stream = Poller(base, period=0.1), ResumingStream(port, cluster.key)
    report: list[str] = []
    time.sleep(PAUSE_S)

    kills: list[float] = []
    leader_name = recorder.boards[-1][1] or ""
    host, leader = _leader(cluster, recorder)
    killed = time.monotonic()
    kills.append(killed)
    leader.signal(signal.SIGKILL)
    wait_until(lambda: recorder.first_after(killed, other_than=leader_name), timeout=10)
    first = recorder.first_after(killed, other_than=leader_name) or float("nan")
    report.append(f"leader ({host}'s refresher) SIGKILLed: next board {first - killed:.2f} s later")
    time.sleep(PAUSE_S)

    killed = time.monotonic()
    kills.append(killed)
    old = cluster.group.kill_primary()
    new = cluster.group.wait_for_new_primary(old)
    promoted = time.monotonic()
    wait_until(lambda: recorder.first_after(promoted), timeout=15)
    first = recorder.first_after(promoted) or float("nan")
    report.append(
        f"Redis primary :{old} SIGKILLed: :{new} promoted {promoted - killed:.2f} s later, "
        f"boards again {first - promoted:.2f} s after that"
    )
    time.sleep(PAUSE_S)

    victim = HOSTS[0]
    kills.append(time.monotonic())
    cluster.hosts[victim].kill_web()
    report.append(f"web host {victim} SIGKILLed (gunicorn and its workers)")
    time.sleep(PAUSE_S)

    polled, streamed = poller.stop(), stream.stop()
    recorder.stop()
    seqs = [seq for seq, _ in recorder.boards]
    got = set(streamed.seqs)
    # Every board between the client's first and its last (it stopped before the recorder).
    span = (streamed.seqs[0], streamed.seqs[-1]) if streamed.seqs else (0, -1)
    missed = [s for s in seqs if span[0] < s <= span[1] and s not in got]
    ages = polled.ages_ms or [0]
    report += [
        f"poller through nginx: {len(polled.statuses)} requests, 5xx {len(polled.server_errors)}, "
        f"failed connections {len(polled.errors)}, data age max {max(ages)} ms",
        f"stream through nginx: {len(streamed.seqs)} boards over {streamed.connects} "
        f"connection(s), missed {len(missed)}, order kept {never_back(streamed.seqs)}",
        f"bus: {len(seqs)} boards, seq strictly increasing {strictly_increasing(seqs)}, "
        f"publishers interleaved {interleaved([p for _, p in recorder.boards]) or 'never'}",
    ]
    if missed:
        started = recorder.arrivals[0]
        when = dict(zip(seqs, recorder.arrivals, strict=False))
        report.append(
            "missed: " + ", ".join(f"seq {s} ({when[s] - started:.1f} s in)" for s in missed)
        )
        report.append(f"kills at {', '.join(f'{t - started:.1f} s' for t in kills)}")
    print("\n".join(report))
    whole = (
        not polled.server_errors
        and not polled.errors
        and not missed
        and never_back(streamed.seqs)
        and strictly_increasing(seqs)
        and not interleaved([p for _, p in recorder.boards])
    )
    print("drill: nothing lost" if whole else "drill: something was lost (see above)")
    return 0 if whole else 1


def main(argv: Sequence[str] | None = None) -> int:
    """Start the cluster; describe it; run until Ctrl-C (or run the drill)."""
    parser = argparse.ArgumentParser(prog="python -m harness.cluster", description=__doc__)
    parser.add_argument("--drill", action="store_true", help="kill each part in turn; report")
    parser.add_argument("--workdir", help="where logs and data go (default: a temporary folder)")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="probboard-cluster-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"starting in {workdir} (logs there) ...", flush=True)
    cluster = start(workdir, os.environ.get("DATABASE_URL"))
    try:
        print(describe(cluster), flush=True)
        if args.drill:
            return drill(cluster)
        stop = threading.Event()
        # Explicit handlers: a shell that started this in the background ignores SIGINT.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.wait(1.0):
            pass
        return 0
    finally:
        print("stopping everything this started ...", flush=True)
        cluster.stop()


if __name__ == "__main__":
    sys.exit(main())
