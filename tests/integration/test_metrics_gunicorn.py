"""Prometheus metrics for real: gunicorn with two gevent workers, the refresher, a redis-server.

The web workers' values are merged by prometheus_client's multiprocess mode in a folder
``gunicorn.conf.py`` makes and removes; the refresher serves its own series on
``REFRESHER_METRICS_PORT``. Accounts are made with the documented CLI on a scratch
PostgreSQL database. Nothing asserts elapsed time: waits are generous deadlines, polled.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.accounts import TEST_PEPPER
from harness.processes import RedisServer, Service, free_port, http_get, service_env, wait_until
from harness.stream_client import StreamConnection
from tests.support.accounts import scratch_accounts
from tests.support.contract import validated

LATEST = "/api/probboard/latest"
GUEST_LATEST = {"endpoint": "latest", "status": "200", "plan": "guest"}
METRICS_FOLDER = "probboard-metrics-*"


# -- reading the text format ------------------------------------------------------------------


def samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Every sample of a text exposition: (name, labels, value)."""
    return [
        (sample.name, dict(sample.labels), float(sample.value))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def sample(text: str, name: str, labels: dict[str, str] | None = None) -> float | None:
    """The value of one sample (labels matched exactly), None when it is absent."""
    wanted = labels or {}
    found = [value for n, got, value in samples(text) if n == name and got == wanted]
    assert len(found) <= 1, (name, wanted, found)
    return found[0] if found else None


def scrape(url: str) -> str:
    status, headers, body = http_get(url, timeout=10)
    assert status == 200, (status, body)
    assert headers["Content-Type"].startswith("text/plain; version="), headers
    return body.decode()


# -- the service ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    """gunicorn (two workers) and a leading refresher on one Redis, with a vip_pro key."""

    service: Service
    refresher_port: int
    vip_key: str

    def web_metrics(self) -> str:
        return scrape(self.service.base + "/metrics")

    def refresher_metrics(self) -> str:
        return scrape(f"http://127.0.0.1:{self.refresher_port}/metrics")


def base_env(**settings: str) -> dict[str, str]:
    """The service's environment; no multiprocess folder unless ``settings`` gives one."""
    env = service_env(BOARD_SOURCE="simulated", TRACK_RECORD="false")
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)  # gunicorn.conf.py makes its own
    env.update(settings)
    return env


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    workdir = tmp_path_factory.mktemp("metrics")
    redis_server = RedisServer(workdir)
    redis_server.start()
    try:
        with scratch_accounts() as accounts:
            accounts.create_user("mira", "vip_pro")
            vip_key = accounts.issue_key("mira")
            refresher_port = free_port()
            env = base_env(
                REDIS_URL=redis_server.url,
                DATABASE_URL=accounts.database_url,
                API_KEY_PEPPER=TEST_PEPPER,
                REFRESHER_METRICS_PORT=str(refresher_port),
            )
            service = Service(workdir, env)
            try:
                service.start_web(workers=2)
                service.start_refresher()
                assert wait_until(lambda: latest(service)["updatedAt"] is not None, timeout=30), (
                    service.refresher.output() if service.refresher else ""
                )
                yield Live(service, refresher_port, vip_key)
            finally:
                service.stop()
    finally:
        redis_server.stop()


def latest(service: Service) -> dict[str, Any]:
    status, _, body = service.get(LATEST)
    assert status == 200, body
    return validated("board", body)


def worker_pids(master: int) -> list[int]:
    return [int(pid) for pid in Path(f"/proc/{master}/task/{master}/children").read_text().split()]


# -- the web workers, merged ------------------------------------------------------------------


def test_guest_requests_are_counted_once_across_both_workers(live: Live) -> None:
    before = sample(live.web_metrics(), "probboard_http_requests_total", GUEST_LATEST) or 0.0
    n = 60

    # Simultaneous requests, each on its own connection: both workers answer some.
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda _: live.service.get(LATEST)[0], range(n)))
    assert statuses == [200] * n

    # Every reading, whichever worker answers it, is the merged total.
    for _ in range(6):
        after = sample(live.web_metrics(), "probboard_http_requests_total", GUEST_LATEST)
        assert after == before + n


def test_board_ages_are_reported_by_the_workers(live: Live) -> None:
    latest(live.service)
    text = live.web_metrics()

    received = sample(text, "probboard_board_age_seconds_count", {"when": "received"})
    served = sample(text, "probboard_board_age_seconds_count", {"when": "served"})
    assert received is not None and received > 0
    assert served is not None and served > 0


def test_the_web_process_shows_no_refresher_series(live: Live) -> None:
    """The refresher's series belong to the refresher's port, not to the web's /metrics."""
    names = {name for name, _, _ in samples(live.web_metrics())}

    assert "probboard_http_requests_total" in names
    assert not {name for name in names if name.startswith("probboard_refresher_")}


# -- the refresher's own port -----------------------------------------------------------------


def test_the_refresher_serves_its_own_metrics(live: Live) -> None:
    text = live.refresher_metrics()

    assert sample(text, "probboard_refresher_leading") == 1.0
    boards = sample(text, "probboard_refresher_boards_total")
    assert boards is not None and boards > 0
    delays = sample(text, "probboard_refresher_publish_delay_seconds_count")
    assert delays is not None and delays > 0
    # It goes on publishing.
    assert wait_until(
        lambda: (
            (sample(live.refresher_metrics(), "probboard_refresher_boards_total") or 0) > boards
        ),
        timeout=20,
    )


# -- the stream -------------------------------------------------------------------------------


def test_an_open_stream_is_counted_while_open(live: Live) -> None:
    def open_streams() -> float | None:
        return sample(live.web_metrics(), "probboard_streams_open")

    def events() -> float:
        return sample(live.web_metrics(), "probboard_stream_events_total") or 0.0

    assert open_streams() in (None, 0.0)
    conn = StreamConnection(live.service.port, {"X-API-Key": live.vip_key})
    try:
        assert conn.status == 200, (conn.status, bytes(conn.body))
        conn.next_event(15, "the first board")
        assert wait_until(lambda: open_streams() == 1.0, timeout=15), live.web_metrics()
        sent = events()
        conn.next_event(15, "the next board")
        assert wait_until(lambda: events() > sent, timeout=15)
        assert open_streams() == 1.0
    finally:
        conn.close()

    assert wait_until(lambda: open_streams() == 0.0, timeout=30), live.web_metrics()


# -- the multiprocess folder ------------------------------------------------------------------


def start_own_gunicorn(tmp_path: Path, **settings: str) -> tuple[Service, Path]:
    """gunicorn (two workers, no refresher) whose temporary files go to a folder of its own."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    service = Service(tmp_path, base_env(TMPDIR=str(scratch), **settings))
    # Own gunicorn: the tests stop or reload it to see its metrics folder go.
    service.start_web(workers=2)
    return service, scratch


def the_metrics_folder(scratch: Path) -> Path:
    [folder] = scratch.glob(METRICS_FOLDER)
    return folder


def test_gunicorn_removes_the_metrics_folder_it_made(
    tmp_path: Path, fresh_redis: RedisServer
) -> None:
    service, scratch = start_own_gunicorn(tmp_path, REDIS_URL=fresh_redis.url)
    try:
        assert service.web is not None
        folder = the_metrics_folder(scratch)
        assert service.get(LATEST)[0] == 200
        # Each worker writes its values there (files named by its pid). The master's
        # environment, read through /proc, does not show the folder: gunicorn.conf.py sets
        # it after exec.
        workers = worker_pids(service.web.pid)
        assert len(workers) == 2
        assert wait_until(
            lambda: all(list(folder.glob(f"*_{pid}.db")) for pid in workers), timeout=30
        ), sorted(path.name for path in folder.iterdir())
    finally:
        service.stop()

    assert not folder.exists()
    assert not list(scratch.glob(METRICS_FOLDER))


def test_gunicorn_removes_its_metrics_folder_after_a_reload(
    tmp_path: Path, fresh_redis: RedisServer
) -> None:
    """SIGHUP (gunicorn's reload) reads gunicorn.conf.py again; the folder is still its own."""
    service, scratch = start_own_gunicorn(tmp_path, REDIS_URL=fresh_redis.url)
    try:
        assert service.web is not None
        master = service.web.pid
        folder = the_metrics_folder(scratch)
        old_workers = set(worker_pids(master))
        os.kill(master, signal.SIGHUP)
        assert wait_until(
            lambda: (
                len(set(worker_pids(master)) - old_workers) == 2
                and not set(worker_pids(master)) & old_workers
            ),
            timeout=30,
        ), service.web.output()
        assert wait_until(lambda: service.get(LATEST)[0] == 200, timeout=30)
        assert list(scratch.glob(METRICS_FOLDER)) == [folder]
    finally:
        service.stop()

    assert not folder.exists()


def test_a_folder_given_by_the_operator_is_emptied_at_start_and_kept(
    tmp_path: Path, fresh_redis: RedisServer
) -> None:
    given = tmp_path / "given-metrics"
    given.mkdir()
    stale = given / "counter_999999.db"
    stale.write_bytes(b"not a metrics file")
    keep = given / "README"
    keep.write_text("the operator's")
    service = Service(
        tmp_path,
        base_env(REDIS_URL=fresh_redis.url, PROMETHEUS_MULTIPROC_DIR=str(given)),
    )
    try:
        # Own gunicorn: on the operator's folder this test seeds before the start.
        service.start_web(workers=2)
        assert not stale.exists()
        text = scrape(service.base + "/metrics")
        assert sample(text, "probboard_http_requests_total", {**GUEST_LATEST}) is None
        assert service.get(LATEST)[0] == 200
        after = scrape(service.base + "/metrics")
        assert sample(after, "probboard_http_requests_total", GUEST_LATEST) == 1.0
    finally:
        service.stop()

    assert given.is_dir()
    assert keep.read_text() == "the operator's"
