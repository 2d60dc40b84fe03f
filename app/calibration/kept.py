"""Kept totals of closed months: ``period=all`` without scanning a year of checkpoints.

``totals.rem_table`` sums one record's checkpoints (``store.Track``: a source's windows of
one market and one length) per (time left, model bin, market bin).
Over a year of four markets that is a scan of millions of rows for every answer (1.5-2 s
on PostgreSQL, issue 36). A closed month's sums do not change unless something is written
into it, so they are kept in ``calibration_window_kept_sums`` once computed (per record: source,
market and window length), and ``all`` adds the kept months to the current month's live
sums (``totals.compute``).

Exactness rests on a counter, not on time: every write into a month adds one to its
``changes`` (``store.note_change``, in the writer's own transaction); kept sums carry the
``changes`` they were computed at (``kept``) and are used only while the two are equal. The
count is read BEFORE the month's rows are summed (each statement of PostgreSQL's READ
COMMITTED sees what was committed before it began), so a write that commits during the sum
leaves ``kept`` behind ``changes``: the month is summed again on the next answer, never
served from sums that miss it.

A month is "closed" once it ended ``CLOSED_AFTER_S`` ago: windows are settled within minutes
of their end, so its sums are computed once, and again only after a late write (a market's
resolution replacing the feed's outcome).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sqlalchemy import and_, func, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import SQLAlchemyError

from app.calibration import store
from app.calibration.store import Track, kept_months, kept_sums

log = logging.getLogger(__name__)
# ``totals.rem_table``: (conn, track, since, until) -> its rows.
RemTable = Callable[[Connection, Track, int | None, int | None], list[Any]]
CLOSED_AFTER_S = 3600
NO_BIN = -1  # a missing bin (no P(up), no mid) in a key column
_SUMS = (
    "n",
    "model_brier",
    "model_log_loss",
    "model_p",
    "market_brier",
    "market_log_loss",
    "market_p",
    "ups",
)


def closed_before(now: float) -> int:
    """The first second of the first month not yet closed at ``now``: months before it are
    kept, windows from it on are summed live."""
    return store.month_of(int(now) - CLOSED_AFTER_S)


def months(first_start: int, until: int) -> list[int]:
    """The months from the one holding ``first_start`` up to (not including) ``until``."""
    found, month = [], store.month_of(first_start)
    while month < until:
        found.append(month)
        month = store.month_after(month)
    return found


def rows(
    conn: Connection, track: Track, first_start: int, until: int, rem_table: RemTable
) -> list[Any]:
    """``rem_table``'s rows (summed over the months) of ``track``'s windows from the month
    of ``first_start`` to ``until`` (a month's start): kept sums where they are up to date;
    any other month is summed with ``rem_table(conn, track, since, until)`` and kept.
    Commits on ``conn``."""
    wanted = months(first_start, until)
    if not wanted:
        return []
    where = and_(
        *track.of(kept_months),
        kept_months.c.month >= wanted[0],
        kept_months.c.month < until,
    )
    valid = {
        month
        for month, changes, kept in conn.execute(
            select(kept_months.c.month, kept_months.c.changes, kept_months.c.kept).where(where)
        )
        if kept is not None and kept == changes
    }
    fresh: list[Any] = []
    for month in wanted:
        if month not in valid:
            fresh += _keep(conn, track, month, rem_table)
    conn.commit()
    return fresh + _kept_rows(conn, track, sorted(valid))


def _keep(conn: Connection, track: Track, month: int, rem_table: RemTable) -> list[Any]:
    """Sum one month live and keep its sums, tagged with the ``changes`` read first. When they
    cannot be kept (a read-only store, a lock), the sums are still answered, and logged."""
    try:
        return _sum_and_keep(conn, track, month, rem_table)
    except SQLAlchemyError as exc:
        conn.rollback()
        key = {**track.key(), "month": month}
        log.warning("track record: cannot keep the sums of %s (%s); summed live", key, exc)
        return list(rem_table(conn, track, month, store.month_after(month)))


def _sum_and_keep(conn: Connection, track: Track, month: int, rem_table: RemTable) -> list[Any]:
    key = {**track.key(), "month": month}
    conn.execute(store.insert_of(conn, kept_months, {**key, "changes": 0}).on_conflict_do_nothing())
    conn.commit()  # the row exists for every writer's upsert from here on
    this_month = and_(*(kept_months.c[name] == value for name, value in key.items()))
    changes = conn.execute(select(kept_months.c.changes).where(this_month)).scalar_one()
    summed = list(rem_table(conn, track, month, store.month_after(month)))
    # Another answer may keep the same month at the same time: one at a time, the last wins
    # (an older count only leaves the month to be summed again).
    conn.execute(select(kept_months.c.month).where(this_month).with_for_update())
    conn.execute(kept_sums.delete().where(*track.of(kept_sums), kept_sums.c.month == month))
    if summed:
        conn.execute(
            kept_sums.insert(),
            [
                {
                    **key,
                    "rem_s": row[0],
                    "model_bin": NO_BIN if row[1] is None else int(row[1]),
                    "market_bin": NO_BIN if row[2] is None else int(row[2]),
                    **dict(zip(_SUMS, row[3:], strict=True)),
                }
                for row in summed
            ],
        )
    conn.execute(kept_months.update().where(this_month).values(kept=changes))
    conn.commit()
    return summed


def _kept_rows(conn: Connection, track: Track, valid: list[int]) -> list[Any]:
    """The kept sums of the ``valid`` months, added up per key (missing bins as None)."""
    if not valid:
        return []
    keys = (kept_sums.c.rem_s, kept_sums.c.model_bin, kept_sums.c.market_bin)
    statement = (
        select(*keys, *(func.sum(kept_sums.c[name]) for name in _SUMS))
        .where(*track.of(kept_sums), kept_sums.c.month.in_(valid))
        .group_by(*keys)
    )
    # PostgreSQL's sum of a BIGINT is a NUMERIC (a Decimal here): back to int and float.
    return [
        (
            rem,
            None if model == NO_BIN else model,
            None if market == NO_BIN else market,
            int(n),
            *(None if value is None else float(value) for value in sums),
        )
        for rem, model, market, n, *sums in conn.execute(statement)
    ]
