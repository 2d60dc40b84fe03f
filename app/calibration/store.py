"""The live record in the SQL store: one row per window, one per checkpoint.

Plain SQLAlchemy Core on its own ``MetaData`` (the refresher writes it without Flask; the
web app reads it on its own engine). The tables are created by the migrations
(``flask --app wsgi db upgrade``). A checkpoint with every value null was passed while the
row was stale, or not seen at all by a refresher that ran through the window: missing,
never filled in.

Each window has a length (``window``: a ``Span.name``, ``5m`` or ``15m``, issue 39), and a
record is one source's windows of one market and one length (``Track``): every read names
all three, so the 15-minute record never mixes into the 5-minute one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    select,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from app.horizons import HOURLY_WORDS
from app.markets import DEFAULT_SPAN

metadata = MetaData()

windows = Table(
    "calibration_windows",
    metadata,
    Column("slug", String(64), primary_key=True),
    Column("window_start", BigInteger, nullable=False, index=True),
    Column("source", String(32), nullable=False),
    # The market (``BTC``): the slug's prefix, stored so that one market's windows of one
    # length in a period are an index range (source, symbol, window, window_start), not a
    # scan of every slug.
    Column("symbol", String(16)),
    # The window's length (``Span.name``); the rows recorded before lengths were stored are
    # the 5-minute ones, as every window was then.
    Column("window", String(8), nullable=False, server_default=DEFAULT_SPAN.name),
    Column("rule", String(8)),
    Column("lookback_s", Integer),  # a TWAP's lookback; null for spot, unknown, or older rows
    Column("price_to_beat", Float),
    Column("outcome", String(4)),
    Column("outcome_source", String(8)),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Index(
        "ix_calibration_windows_source_symbol_window_start",
        "source",
        "symbol",
        "window",
        "window_start",
    ),
    # One market's windows newest first, a page at a time (``app.calibration.export``).
    Index("ix_calibration_windows_source_window_start", "source", "window_start"),
)

checkpoints = Table(
    "calibration_checkpoints",
    metadata,
    Column(
        "slug",
        String(64),
        ForeignKey("calibration_windows.slug", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("rem_s", Integer, primary_key=True),
    Column("p_up", Float),
    Column("market_mid", Float),
    Column("sigma", Float),
    Column("price", Float),
    Column("price_to_beat", Float),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
)

# Kept totals of closed months (``app.calibration.kept``): ``all`` sums them instead of
# scanning a year of checkpoints. ``changes`` counts the writes into a month (every save
# below adds one); the sums are valid while ``kept`` (the ``changes`` they were computed
# at) equals it. One record per (source, market, window length): these tables replaced
# ``calibration_kept_months``/``_sums`` (keyed without a length), which stay for the
# previous release (a rollback does not undo a migration, docs/deploy.md).
kept_months = Table(
    "calibration_window_kept_months",
    metadata,
    Column("source", String(32), primary_key=True),
    Column("symbol", String(16), primary_key=True),
    Column("window", String(8), primary_key=True),
    Column("month", BigInteger, primary_key=True),  # the month's first second (UTC, unix)
    Column("changes", BigInteger, nullable=False),
    Column("kept", BigInteger),
)

# The previous release's kept months: every 5-minute write still counts in it, so that after
# a rollback that release never serves a month's sums from before a write this one made.
# Drop it (and ``calibration_kept_sums``) once no release in use reads them.
legacy_kept_months = Table(
    "calibration_kept_months",
    metadata,
    Column("source", String(32), primary_key=True),
    Column("symbol", String(16), primary_key=True),
    Column("month", BigInteger, primary_key=True),
    Column("changes", BigInteger, nullable=False),
    Column("kept", BigInteger),
)

kept_sums = Table(
    "calibration_window_kept_sums",
    metadata,
    Column("source", String(32), primary_key=True),
    Column("symbol", String(16), primary_key=True),
    Column("window", String(8), primary_key=True),
    Column("month", BigInteger, primary_key=True),
    Column("rem_s", Integer, primary_key=True),
    Column("model_bin", Integer, primary_key=True),
    Column("market_bin", Integer, primary_key=True),
    Column("n", BigInteger, nullable=False),
    Column("model_brier", Float),
    Column("model_log_loss", Float),
    Column("model_p", Float),
    Column("market_brier", Float),
    Column("market_log_loss", Float),
    Column("market_p", Float),
    Column("ups", Float, nullable=False),
)


@dataclass(frozen=True)
class Track:
    """Whose record: one source's windows of one market (``BTC``) and one length (``5m``)."""

    source: str
    symbol: str
    window: str

    def key(self) -> dict[str, str]:
        """The three as the tables' columns name them."""
        return {"source": self.source, "symbol": self.symbol, "window": self.window}

    def of(self, table: Table) -> list[ColumnElement[bool]]:
        """The conditions on ``table``'s rows of this record (its three columns)."""
        return [table.c[name] == value for name, value in self.key().items()]


def insert_of(conn: Connection, table: Table, values: Mapping[str, Any]) -> Any:
    """The dialect's INSERT of ``values`` (it has ON CONFLICT) for SQLite or PostgreSQL."""
    dialect = {"postgresql": postgresql, "sqlite": sqlite}.get(conn.dialect.name)
    if dialect is None:
        raise RuntimeError(f"the track record needs SQLite or PostgreSQL, not {conn.dialect.name}")
    return dialect.insert(table).values(**values)


def _upsert(conn: Connection, table: Table, values: Mapping[str, Any], update: list[str]) -> None:
    """Insert ``values``, or update the ``update`` columns of the row with the same key."""
    statement = insert_of(conn, table, values)
    keys = [c.name for c in table.primary_key.columns]
    changes = {name: statement.excluded[name] for name in update}
    conn.execute(statement.on_conflict_do_update(index_elements=keys, set_=changes))


def symbol_of(slug: str) -> str:
    """The market of a window's slug: ``btc-updown-5m-1795663200`` is ``BTC``, and an hourly
    market's coin in words (``bitcoin-up-or-down-march-29-2026-12am-et``) its symbol."""
    head = slug.split("-", 1)[0]
    by_word = {word: symbol for symbol, word in HOURLY_WORDS.items()}
    return by_word.get(head, head.upper())


def save_window(conn: Connection, window: Mapping[str, Any]) -> None:
    """Store (or update) a window: ``slug``, ``window_start``, ``source``, ``rule``,
    ``price_to_beat``, ``outcome``, ``outcome_source`` (``symbol``: from the slug when
    absent; ``window``: its length, ``5m`` when absent, set once; ``lookback_s`` when
    known). A known outcome is never erased."""
    symbol = window.get("symbol") or symbol_of(str(window["slug"]))
    length = window.get("window") or DEFAULT_SPAN.name
    values = {**window, "symbol": symbol, "window": length, "updated_at": datetime.now(UTC)}
    update = ["rule", "price_to_beat", "updated_at"]
    if window.get("lookback_s") is not None:  # learnt late (or never): never erased
        update.append("lookback_s")
    if window.get("outcome") is not None:
        update += ["outcome", "outcome_source"]
    _upsert(conn, windows, values, update)
    note_change(conn, Track(str(window["source"]), symbol, length), int(window["window_start"]))


def save_checkpoint(conn: Connection, slug: str, checkpoint: Mapping[str, Any]) -> None:
    """Store one checkpoint of window ``slug`` (``rem_s``, ``p_up``, ``market_mid``, ``sigma``,
    ``price``, ``price_to_beat``); the first one stored for a rem stays."""
    values = {**checkpoint, "slug": slug, "recorded_at": datetime.now(UTC)}
    conn.execute(insert_of(conn, checkpoints, values).on_conflict_do_nothing())
    columns = (windows.c.source, windows.c.symbol, windows.c.window, windows.c.window_start)
    window = conn.execute(select(*columns).where(windows.c.slug == slug)).one_or_none()
    if window is not None:  # a checkpoint without its window is in no score
        track = Track(window.source, window.symbol or symbol_of(slug), window.window)
        note_change(conn, track, window.window_start)


def month_of(at: int) -> int:
    """The first second (UTC, unix) of the month holding ``at``."""
    day = datetime.fromtimestamp(at, UTC)
    return int(datetime(day.year, day.month, 1, tzinfo=UTC).timestamp())


def month_after(month: int) -> int:
    """The first second of the month after the one starting at ``month``."""
    day = datetime.fromtimestamp(month, UTC)
    year, index = divmod(day.month, 12)  # month 12 -> (1, 0): January of the next year
    return int(datetime(day.year + year, index + 1, 1, tzinfo=UTC).timestamp())


def note_change(conn: Connection, track: Track, window_start: int) -> None:
    """Count a write into ``track``'s month of ``window_start``: its kept totals, if any, are
    out of date from this transaction's commit on (an upsert, so that a computation under
    way on another connection cannot miss it: see ``app.calibration.kept``)."""
    month = month_of(window_start)
    _count_change(conn, kept_months, {**track.key(), "month": month})
    if track.window == DEFAULT_SPAN.name:  # the previous release's record (see its table)
        _count_change(conn, legacy_kept_months, {**track.key(), "month": month})


def _count_change(conn: Connection, table: Table, key: dict[str, Any]) -> None:
    """Add one to ``changes`` of ``table``'s row ``key`` (its key columns; others ignored)."""
    names = [c.name for c in table.primary_key.columns]
    statement = insert_of(conn, table, {name: key[name] for name in names} | {"changes": 1})
    changed = {"changes": table.c.changes + 1}
    conn.execute(statement.on_conflict_do_update(index_elements=names, set_=changed))


def load(conn: Connection, source: str, window: str = DEFAULT_SPAN.name) -> list[dict[str, Any]]:
    """The windows of ``source`` of one length (``window``; the contract's 5 minutes unless
    named) in time order, each with its checkpoints (the shape ``app.calibration.summary``
    scores)."""
    found: dict[str, dict[str, Any]] = {}
    mine = (windows.c.source == source, windows.c.window == window)
    for row in conn.execute(
        select(windows).where(*mine).order_by(windows.c.window_start)
    ).mappings():
        found[row["slug"]] = {
            "slug": row["slug"],
            "windowStart": row["window_start"],
            "rule": row["rule"],
            "priceToBeat": row["price_to_beat"],
            "outcome": row["outcome"],
            "outcomeSource": row["outcome_source"],
            "checkpoints": [],
        }
    statement = (
        select(checkpoints)
        .join(windows, windows.c.slug == checkpoints.c.slug)
        .where(*mine)
        .order_by(checkpoints.c.slug, checkpoints.c.rem_s.desc())
    )
    for row in conn.execute(statement).mappings():
        taken = found.get(row["slug"])
        if taken is not None:
            taken["checkpoints"].append(
                {"remS": row["rem_s"], "pUp": row["p_up"], "marketMid": row["market_mid"]}
            )
    return list(found.values())
