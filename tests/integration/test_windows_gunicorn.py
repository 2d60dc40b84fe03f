"""The record's export for real: gunicorn with two gevent workers, PostgreSQL migrated with
``flask db upgrade``, the guest limit counted in a real redis-server.

The record is written with the store's own writers before the service starts (no refresher:
the windows are exactly those written). Checked over HTTP: pages followed with their cursors
across both workers, the CSV sent in chunks as it is written, the guest limit shared by the
workers, and the CSV download loop of docs/calibration.md run as written.
"""

from __future__ import annotations

import csv
import http.client
import io
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine

from app.calibration import store
from app.calibration.checkpoints import REMS
from app.markets import MARKETS
from harness.processes import ROOT, RedisServer, Service, service_env
from harness.spans import FIVE_MINUTES
from tests.support.accounts import scratch_accounts
from tests.support.contract import validated

WINDOWS = "/api/probboard/windows"
T0 = 1_800_000_000
COUNT = 25
LIMIT = 40  # guest reads a minute per address: more than the tests below need


def fill(url: str) -> None:
    """COUNT windows of BTC and ETH, nine checkpoints each."""
    engine = create_engine(url)
    with engine.begin() as conn:
        for symbol in ("BTC", "ETH"):
            for i in range(COUNT):
                start = T0 + 300 * i
                slug = MARKETS[symbol].slug(start, FIVE_MINUTES)
                store.save_window(conn, {
                    "slug": slug, "window_start": start, "source": "simulated", "rule": "spot",
                    "price_to_beat": 100.0 + i, "outcome": "up" if i % 2 else "down",
                    "outcome_source": "feed",
                })  # fmt: skip
                for rem in REMS:
                    store.save_checkpoint(conn, slug, {"rem_s": rem, "p_up": 0.5,
                                                       "market_mid": 0.5, "sigma": 0.001,
                                                       "price": 101.0})  # fmt: skip
    engine.dispose()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """gunicorn (2 gevent workers) on a filled, migrated PostgreSQL and Redis."""
    workdir = tmp_path_factory.mktemp("windows")
    redis_server = RedisServer(workdir)
    redis_server.start()
    try:
        with scratch_accounts() as accounts:
            fill(accounts.database_url)
            env = service_env(
                REDIS_URL=redis_server.url,
                DATABASE_URL=accounts.database_url,
                SYMBOLS="BTC,ETH",
                EMBEDDED_REFRESHER="false",
                GUEST_RATE_LIMIT=f"{LIMIT} per minute",
            )
            service = Service(workdir, env)
            try:
                service.start_web(workers=2)
                yield service
            finally:
                service.stop()
    finally:
        redis_server.stop()


def get(
    service: Service, query: str, headers: dict[str, str] | None = None
) -> tuple[http.client.HTTPResponse, bytes]:
    """One request on a new connection (either worker may answer): the response, its body."""
    connection = http.client.HTTPConnection("127.0.0.1", service.port, timeout=10)
    try:
        connection.request("GET", f"{WINDOWS}?{query}", headers=headers or {})
        response = connection.getresponse()
        return response, response.read()
    finally:
        connection.close()


def test_pages_follow_their_cursors_across_the_workers(live: Service) -> None:
    seen: list[int] = []
    query = "symbol=eth&limit=4"
    cursor: str | None = ""
    while cursor is not None:
        response, body = get(live, query + (f"&cursor={cursor}" if cursor else ""))
        assert response.status == 200, body
        page: dict[str, Any] = validated("windows", body)
        seen += [w["windowStart"] for w in page["windows"]]
        assert all(len(w["checkpoints"]) == len(REMS) for w in page["windows"])
        cursor = page["next"]
    assert seen == [T0 + 300 * i for i in reversed(range(COUNT))]


def test_the_csv_is_sent_as_it_is_written(live: Service) -> None:
    response, body = get(live, "symbol=BTC&limit=20", {"Accept": "text/csv"})
    assert response.status == 200
    assert response.getheader("Content-Type", "").startswith("text/csv")
    assert response.getheader("Transfer-Encoding") == "chunked"  # no length: a stream
    assert response.getheader("X-Next-Cursor")
    lines = list(csv.DictReader(io.StringIO(body.decode())))
    assert len(lines) == 20 * len(REMS)
    assert lines[0]["windowStart"] == str(T0 + 300 * (COUNT - 1))


def test_the_documented_download_loop_gets_every_window(live: Service, tmp_path: Path) -> None:
    text = (ROOT / "docs" / "calibration.md").read_text()
    [loop] = re.findall(r"(url=\"\$B\?symbol=ETH&format=csv.*?> eth-windows\.csv)", text, re.S)
    limited = loop.replace("limit=1000", "limit=10")  # three pages
    script = f"B={live.base}{WINDOWS}\n{limited}\n"
    subprocess.run(["bash", "-euc", script], cwd=tmp_path, check=True, timeout=60)
    rows = list(csv.DictReader(io.StringIO((tmp_path / "eth-windows.csv").read_text())))
    assert len(rows) == COUNT * len(REMS)
    assert len({row["windowStart"] for row in rows}) == COUNT


def test_the_guest_limit_is_shared_by_the_workers(live: Service) -> None:
    """Last: it spends this address's window. Each request on a new connection, so both
    workers answer; a 429 after the limit means they counted together, in Redis."""
    remaining = int(get(live, "limit=1")[0].getheader("X-RateLimit-Remaining", "-1"))
    assert 0 < remaining < LIMIT
    statuses = [get(live, "limit=1&format=csv")[0].status for _ in range(remaining + 5)]
    assert 429 in statuses
    assert statuses.index(429) >= remaining  # never refused before the limit
