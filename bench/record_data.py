"""A generated track record for ``bench.record``: a year of windows of four markets.

Each window has nine checkpoints (the recorder's times left) with a P(up), a market mid,
sigma, a price and the price to beat; about 3 % of them are missing (every value null), as
a stale board leaves them; every window but the last of each market has an outcome. The
values are random (seeded): the bench measures what scoring costs, not how good they are.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg

from app.calibration.checkpoints import REMS
from app.markets import Market
from harness.spans import FIVE_MINUTES, WINDOW_S

WINDOW_COLUMNS = (
    "slug", "window_start", "source", "symbol", "rule", "price_to_beat", "outcome",
    "outcome_source", "updated_at",
)  # fmt: skip
CHECKPOINT_COLUMNS = (
    "slug", "rem_s", "p_up", "market_mid", "sigma", "price", "price_to_beat", "recorded_at",
)  # fmt: skip
Rows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


def batches(markets: tuple[Market, ...], end: int, days: int, seed: int = 36) -> Iterator[Rows]:
    """(windows, checkpoints) rows, one day of one market at a time, up to window ``end``."""
    rng = random.Random(seed)
    stamp = datetime.fromtimestamp(end, UTC)
    first = end - days * 86_400
    for market in markets:
        for day in range(first, end, 86_400):
            windows: list[tuple[Any, ...]] = []
            points: list[tuple[Any, ...]] = []
            for start in range(day, min(day + 86_400, end), WINDOW_S):
                slug = market.slug(start, FIVE_MINUTES)
                ptb = market.start_price * (1 + rng.gauss(0, 0.01))
                drift = rng.gauss(0, 1)
                settled = start + WINDOW_S < end
                up = settled and rng.random() < 0.5 + 0.4 * (drift > 0) - 0.2
                outcome = ("up" if up else "down") if settled else None
                windows.append((slug, start, "simulated", market.symbol, "spot", ptb, outcome,
                                "feed" if settled else None, stamp))  # fmt: skip
                for rem in REMS:
                    if rng.random() < 0.03:
                        points.append((slug, rem, None, None, None, None, None, stamp))
                        continue
                    p = min(max(0.5 + drift * (300 - rem) / 600 + rng.gauss(0, 0.1), 0.0), 1.0)
                    mid = min(max(p + rng.gauss(0, 0.05), 0.01), 0.99)
                    points.append((slug, rem, p, mid, 0.5, ptb * (1 + rng.gauss(0, 0.001)),
                                   ptb, stamp))  # fmt: skip
            yield windows, points


def fill_postgres(url: str, data: Iterator[Rows]) -> int:
    """COPY every batch into the (migrated) database at ``url``; then VACUUM ANALYZE, as a
    database that has lived a year has been. Returns the checkpoints written."""
    written = 0
    with psycopg.connect(url, autocommit=True) as conn:
        for windows, points in data:
            with conn.transaction(), conn.cursor() as cursor:
                _copy(cursor, "calibration_windows", WINDOW_COLUMNS, windows)
                _copy(cursor, "calibration_checkpoints", CHECKPOINT_COLUMNS, points)
            written += len(points)
        conn.execute("VACUUM ANALYZE calibration_windows")
        conn.execute("VACUUM ANALYZE calibration_checkpoints")
    return written


def _copy(
    cursor: psycopg.Cursor[Any], table: str, columns: tuple[str, ...], rows: list[tuple[Any, ...]]
) -> None:
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def fill_sqlite(path: str, data: Iterator[Rows]) -> int:
    """Insert every batch into the (migrated) SQLite file at ``path``; then ANALYZE.
    Returns the checkpoints written."""
    written = 0
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA synchronous = OFF")  # a generated file: a crash loses nothing
        for windows, points in data:
            with conn:
                conn.executemany(_insert("calibration_windows", WINDOW_COLUMNS), windows)
                conn.executemany(_insert("calibration_checkpoints", CHECKPOINT_COLUMNS), points)
            written += len(points)
        conn.execute("ANALYZE")
    finally:
        conn.close()
    return written


def _insert(table: str, columns: tuple[str, ...]) -> str:
    return f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})"
