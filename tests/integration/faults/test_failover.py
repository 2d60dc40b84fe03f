"""No single point of failure, on loopback with real parts: two refreshers under a lease,
Redis Sentinel (a primary, two replicas, three sentinels), two gunicorn hosts behind nginx.

Each test kills one part while a guest polls ``/latest`` and a vip_pro client holds the
stream (reconnecting with ``Last-Event-ID`` as the README says), and checks what every
client and every board of the run saw.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.accounts import TEST_PEPPER
from harness.failover_clients import (
    BusRecorder,
    Poller,
    ResumingStream,
    StreamLog,
    interleaved,
    never_back,
    strictly_increasing,
)
from harness.nginx import Nginx
from harness.processes import (
    BIN,
    Process,
    RedisServer,
    Service,
    http_get,
    service_env,
    wait_until,
)
from harness.sentinel import SentinelGroup
from harness.stream_client import StreamConnection
from tests.support.accounts import AccountsCli, scratch_accounts

LATEST = "/api/probboard/latest"
VERIFY = "/api/keys/verify"
# A standby takes over once the lease (1.5 s) lapses: a generous bound on that wait. The
# 2 s target itself is measured by bench/failover.py (make bench-failover).
TAKEOVER_S = 5.0
PUSHES_BACK_S = 10.0  # boards flow again within this long of a Redis failover


@dataclass
class Accounts:
    """The CLI environment of a scratch PostgreSQL database, a vip_pro key, a user session."""

    cli: AccountsCli
    vip_key: str
    user_session: str

    @property
    def env(self) -> dict[str, str]:
        """The environment a service needs for this database."""
        return self.cli.env


@pytest.fixture(scope="module")
def accounts() -> Iterator[Accounts]:
    """A migrated scratch database with a vip_pro account (a key) and a user (a session)."""
    with scratch_accounts() as cli:
        cli.create_user("vera", "vip_pro")
        cli.create_user("uma", "user")
        yield Accounts(cli, vip_key=cli.issue_key("vera"), user_session=cli.issue_session("uma"))


def host_env(redis_url: str, accounts: Accounts, **settings: str) -> dict[str, str]:
    """A web host's or refresher's environment: shared Redis and PostgreSQL."""
    return service_env(
        REDIS_URL=redis_url,
        DATABASE_URL=accounts.env["DATABASE_URL"],
        API_KEY_PEPPER=TEST_PEPPER,
        BOARD_SOURCE="simulated",
        TRACK_RECORD="false",
        **settings,
    )


def refresher(env: dict[str, str], workdir: Path, name: str) -> Process:
    """``python -m app.refresher``, as the unit file starts it."""
    return Process([str(BIN / "python"), "-m", "app.refresher"], env, workdir / f"{name}.log")


def nothing_missed(log: StreamLog, bus: list[tuple[int, str | None]]) -> list[int]:
    """The boards of the bus after the client's first that the client never received."""
    if not log.seqs:
        return [seq for seq, _ in bus]
    got = set(log.seqs)
    return [seq for seq, _ in bus if seq > log.seqs[0] and seq not in got]


def assert_clients_whole(log: StreamLog, recorder: BusRecorder, until: int) -> None:
    """The stream client got every board the bus carried (up to seq ``until``), in order
    (a board that went stale while the bus was away is sent again with its age: same seq)."""
    assert never_back(log.seqs), log.seqs
    bus = [b for b in recorder.boards if b[0] <= until]
    assert nothing_missed(log, bus) == [], (log, bus)


@dataclass
class Run:
    """One web host and two refreshers on a bus, a recorder, a poller and a stream client."""

    web: Service
    refreshers: list[Process]
    recorder: BusRecorder
    poller: Poller
    stream: ResumingStream


@contextmanager
def running(workdir: Path, redis_url: str, accounts: Accounts) -> Iterator[Run]:
    """A ``Run`` with boards flowing for 3 s; every process stopped afterwards."""
    env = host_env(redis_url, accounts, GUEST_RATE_LIMIT="100000 per minute")
    web = Service(workdir, env)
    refreshers: list[Process] = []
    try:
        # Own gunicorn and refreshers: the tests kill the leader or the Redis primary.
        web.start_web(workers=2)
        refreshers = [refresher(env, workdir, f"refresher-{i}") for i in range(2)]
        recorder = BusRecorder(redis_url)
        assert wait_until(lambda: len(recorder.boards) >= 3, timeout=30), refreshers[0].output()
        run = Run(
            web, refreshers, recorder, Poller(web.base), ResumingStream(web.port, accounts.vip_key)
        )
        time.sleep(3)
        yield run
    finally:
        for process in refreshers:
            process.stop()
        web.stop()


def test_a_standby_refresher_takes_over_when_the_leader_is_killed(
    tmp_path: Path, accounts: Accounts, fresh_redis: RedisServer
) -> None:
    with running(tmp_path, fresh_redis.url, accounts) as run:
        recorder, refreshers = run.recorder, run.refreshers
        leader_name = recorder.boards[-1][1]
        assert leader_name is not None
        (leader,) = [p for p in refreshers if leader_name.endswith(f":{p.pid}")]
        killed_at = time.monotonic()
        leader.signal(signal.SIGKILL)
        taken_over = wait_until(
            lambda: recorder.first_after(killed_at, other_than=leader_name), timeout=10
        )
        assert taken_over, [r.output()[-2000:] for r in refreshers]
        first = recorder.first_after(killed_at, other_than=leader_name)
        assert first is not None
        time.sleep(3)
        polled, streamed = run.poller.stop(), run.stream.stop()
        recorder.stop()

        print(  # the figures for the README (pytest -s)
            f"\nleader killed: standby published after {first - killed_at:.2f} s; "
            f"{len(recorder.boards)} boards; max age served {max(polled.ages_ms)} ms "
            f"over {len(polled.statuses)} polls; stream got {len(streamed.seqs)} boards"
        )
        assert first - killed_at < TAKEOVER_S, f"took over after {first - killed_at:.2f} s"
        seqs = [seq for seq, _ in recorder.boards]
        assert strictly_increasing(seqs), seqs
        assert interleaved([p for _, p in recorder.boards]) == []
        assert polled.statuses and polled.server_errors == [], polled.statuses
        (threshold,) = polled.stale_thresholds
        assert max(polled.ages_ms) < threshold, max(polled.ages_ms)
        assert_clients_whole(streamed, recorder, until=streamed.seqs[-1])
        assert streamed.seqs[-1] > seqs[seqs.index(streamed.seqs[0])]  # it kept flowing


def test_the_redis_primary_killed_under_polling_and_streams(
    tmp_path: Path, accounts: Accounts
) -> None:
    # Own sentinel group: the test kills its primary.
    group = SentinelGroup(tmp_path)
    group.start()
    try:
        with running(tmp_path, group.url, accounts) as run:
            recorder, refreshers = run.recorder, run.refreshers
            killed_at = time.monotonic()
            old = group.kill_primary()
            new = group.wait_for_new_primary(old)
            promoted_at = time.monotonic()
            pushed_back = wait_until(
                lambda: recorder.first_after(promoted_at), timeout=PUSHES_BACK_S
            )
            assert pushed_back, [r.output()[-2000:] for r in refreshers]
            client = group.client(new)
            # Guests' counters are written on the new primary again (the limiter left memory).
            counting = wait_until(lambda: bool(client.keys("LIMITS*")), timeout=15)
            time.sleep(2)
            polled, streamed = run.poller.stop(), run.stream.stop()
            recorder.stop()

            first_after = recorder.first_after(promoted_at)
            assert first_after is not None
            print(
                f"\nprimary killed: new primary after {promoted_at - killed_at:.2f} s, boards "
                f"{first_after - promoted_at:.2f} s after that; {len(polled.statuses)} polls, "
                f"statuses {sorted(set(polled.statuses))}, max age {max(polled.ages_ms)} ms; "
                f"stream got {len(streamed.seqs)} boards over {streamed.connects} connection(s)"
            )
            assert counting, "no rate-limit counter on the new primary"
            assert polled.statuses and polled.server_errors == [], polled.statuses
            assert polled.errors == []
            seqs = [seq for seq, _ in recorder.boards]
            assert strictly_increasing(seqs), seqs
            assert interleaved([p for _, p in recorder.boards]) == []
            assert streamed.refusals == [], streamed
            assert_clients_whole(streamed, recorder, until=streamed.seqs[-1])
            assert streamed.seqs[-1] >= recorder.since(promoted_at)[0][0]  # live after it
            assert int(client.get("probboard:board:seq") or 0) >= streamed.seqs[-1]
    finally:
        group.stop()


@contextmanager
def two_hosts(
    workdir: Path, redis_url: str, accounts: Accounts, **settings: str
) -> Iterator[tuple[list[Service], Nginx, str]]:
    """Two gunicorn hosts (one refresher) on one Redis and one database, behind nginx."""
    env = host_env(redis_url, accounts, TRUSTED_PROXIES="127.0.0.1/32", **settings)
    hosts = []
    for name in ("vm1", "vm2"):
        folder = workdir / name
        folder.mkdir()
        hosts.append(Service(folder, env))
    nginx: Nginx | None = None
    try:
        for host in hosts:
            # Own hosts and nginx: each test's own limits, or a host the test kills.
            host.start_web(workers=2)
        hosts[0].start_refresher()
        nginx = Nginx(workdir, [host.port for host in hosts])
        yield hosts, nginx, redis_url
    finally:
        if nginx is not None:
            nginx.stop()
        for host in hosts:
            host.stop()


def test_limits_stream_caps_and_revocation_hold_across_hosts(
    tmp_path: Path, accounts: Accounts, fresh_redis: RedisServer
) -> None:
    limits = {"GUEST_RATE_LIMIT": "5 per minute", "USER_RATE_LIMIT": "5 per minute"}
    settings = {"STREAM_MAX_PER_KEY": "1", **limits}
    with two_hosts(tmp_path, fresh_redis.url, accounts, **settings) as (hosts, nginx, _):
        # Guests: one address, counted once across both hosts (and through nginx).
        address = {"X-Forwarded-For": "203.0.113.7"}
        statuses = [hosts[i % 2].get(LATEST, address)[0] for i in range(7)]
        assert statuses == [200] * 5 + [429] * 2, statuses
        through = [http_get(nginx.base + LATEST)[0] for _ in range(7)]
        assert through == [200] * 5 + [429] * 2, through
        # Accounts: one user's limit across both hosts.
        user = {"Cookie": f"probboard_session={accounts.user_session}"}
        statuses = [hosts[i % 2].get(LATEST, user)[0] for i in range(7)]
        assert statuses == [200] * 5 + [429] * 2, statuses
        # Streams per key: one open on vm1, so vm2 refuses a second.
        accounts.cli.create_user("rex", "vip_pro")
        key = accounts.cli.issue_key("rex")
        first = ResumingStream(hosts[0].port, key)
        try:
            assert wait_until(lambda: first.log.seqs, timeout=15)
            second = StreamConnection(hosts[1].port, {"X-API-Key": key}, timeout=5)
            second.close()
            assert second.status == 429, second.status
        finally:
            first.stop()
        # Revocation: both hosts refuse the key within AUTH_CACHE_MS (2 s by default).
        assert all(host.get(VERIFY, {"X-API-Key": key})[0] == 200 for host in hosts)
        accounts.cli.run("keys", "revoke", key)
        # Each host polled until it refuses, then left alone: every 401 counts a failed key
        # attempt from this address (AUTH_FAILURE_LIMIT, 20 a minute), and polling a host
        # that already refuses while the other's cache ran on blocked the address (429) in
        # two CI runs, so neither could be seen refusing.
        for host in hosts:
            refused = wait_until(lambda h=host: h.get(VERIFY, {"X-API-Key": key})[0] == 401, 10)
            assert refused, f"{host.port} still takes the revoked key"


def test_a_killed_web_host_sends_its_traffic_to_the_other(
    tmp_path: Path, accounts: Accounts, fresh_redis: RedisServer
) -> None:
    with two_hosts(
        tmp_path, fresh_redis.url, accounts, GUEST_RATE_LIMIT="100000 per minute"
    ) as setup:
        hosts, nginx, redis_url = setup
        recorder = BusRecorder(redis_url)
        # nginx takes turns: one stream on each host.
        streams = []
        for _ in range(2):
            streams.append(ResumingStream(nginx.port, accounts.vip_key))
            assert wait_until(lambda: streams[-1].log.seqs, timeout=15)
        poller = Poller(nginx.base)
        try:
            time.sleep(1)
            hosts[0].kill_web()
            killed_at = time.monotonic()
            time.sleep(4)
        finally:
            polled = poller.stop()
            logs = [stream.stop() for stream in streams]
            recorder.stop()
        print(
            f"\nweb host killed: {len(polled.statuses)} polls through nginx, statuses "
            f"{sorted(set(polled.statuses))}; streams reconnected {[x.connects for x in logs]}"
        )
        assert polled.statuses and polled.server_errors == [] and polled.errors == [], polled
        after = recorder.since(killed_at)
        assert after, "no board after the kill"
        for streamed in logs:
            assert streamed.refusals == [] and streamed.errors == [], streamed
            assert_clients_whole(streamed, recorder, until=streamed.seqs[-1])
            assert streamed.seqs[-1] >= after[0][0]  # still live after the kill
        # The stream that was on vm1 came back (through nginx, on vm2).
        assert sorted(log.connects for log in logs) == [1, 2], logs
        assert hosts[1].get("/api/health")[0] == 200
