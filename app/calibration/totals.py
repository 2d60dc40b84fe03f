"""The track record's scores from sums the database computes (``GROUP BY``), not from rows.

``summary.summarize`` scores windows loaded into Python: at a year of four markets that is
millions of rows per answer (issue 36). Here one query returns, per time left and per pair
of reliability bins (the model's P(up), the market's mid; null when missing), the count and
the sums of the Brier and log-loss terms, of p and of the outcome: at most 9 x 12 x 12 rows,
from which every figure of the answer is a sum and one division (``score``). A second query
counts the windows and finds the period's first and last. Both read one record
(``store.Track``: one source's windows of one market and one length) from ``window_start``
on, an index range of (source, symbol, window, window_start), at that length's checkpoints
(``Span.rems``).

Means are sums divided by counts, as in ``scores``, with the database's own (not
compensated) summation: equal to ``summarize``'s to about 1e-12, which a test checks on
SQLite and PostgreSQL. Log loss needs ``ln``: PostgreSQL has it, SQLite from 3.35 when
built with its math functions; without them ``sqlite_math`` registers Python's on the
connection.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, case, cast, func, select, true
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from app.calibration import kept, outcomes, scores
from app.calibration.store import Track, checkpoints, windows
from app.markets import SPANS


@dataclass
class Sums:
    """A count, and the sums of the Brier and log-loss terms of some (p, outcome) pairs."""

    n: int = 0
    brier: float = 0.0
    log_loss: float = 0.0

    def add(self, n: int, brier: float, log_loss: float) -> None:
        """Count ``n`` more pairs whose terms sum to ``brier`` and ``log_loss``."""
        self.n += n
        self.brier += brier
        self.log_loss += log_loss

    def means(self) -> dict[str, float | None]:
        """``scores.mean_scores``'s answer: the mean Brier score and log loss (None for none)."""
        if not self.n:
            return {"brier": None, "logLoss": None}
        return {"brier": self.brier / self.n, "logLoss": self.log_loss / self.n}


@dataclass
class Bin:
    """One reliability bin: count, sum of p, sum of outcomes (1 for UP)."""

    n: int = 0
    p: float = 0.0
    up: int = 0


@dataclass
class Rem:
    """One time left: the model's, the market's, and both where a window has both."""

    model: Sums = field(default_factory=Sums)
    market: Sums = field(default_factory=Sums)
    model_both: Sums = field(default_factory=Sums)
    market_both: Sums = field(default_factory=Sums)


def _clipped(p: ColumnElement[float]) -> ColumnElement[float]:
    return case((p < scores.CLIP, scores.CLIP), (p > 1 - scores.CLIP, 1 - scores.CLIP), else_=p)


def _terms(p: ColumnElement[float], up: ColumnElement[float]) -> list[ColumnElement[Any]]:
    """Sums of (p - o)², of -ln(p or 1 - p, clipped) and of p, over the group's rows."""
    given = case((windows.c.outcome == outcomes.UP, _clipped(p)), else_=1.0 - _clipped(p))
    return [
        func.sum((p - up) * (p - up)),
        func.sum(-func.ln(given)),
        func.sum(p),
    ]


def _bin(p: ColumnElement[float], dialect: str) -> ColumnElement[Any]:
    """``scores.reliability``'s bin of p before the last's clamp: ``int(p · BINS)``, which
    truncates. SQLite's CAST to INTEGER truncates; PostgreSQL's rounds, its trunc() does not
    (and SQLAlchemy replaces SQLite's floor() with Python's, which fails on NULL)."""
    scaled = p * float(scores.BINS)
    return cast(scaled, Integer) if dialect == "sqlite" else func.trunc(scaled)


def _where(track: Track, since: int | None, until: int | None = None) -> list[ColumnElement[bool]]:
    found = track.of(windows)
    found.append(windows.c.window_start >= since if since is not None else true())
    if until is not None:
        found.append(windows.c.window_start < until)
    return found


def rem_table(
    conn: Connection, track: Track, since: int | None, until: int | None = None
) -> list[Any]:
    """Per (rem, model bin, market bin): count, the model's three sums, the market's three
    sums, and the count of UP; over ``track``'s windows with an outcome that start at
    ``since`` or later (and before ``until``), at its length's checkpoints."""
    up = case((windows.c.outcome == outcomes.UP, 1.0), else_=0.0)
    p, mid = checkpoints.c.p_up, checkpoints.c.market_mid
    dialect = conn.dialect.name
    model_bin = _bin(p, dialect).label("model_bin")
    market_bin = _bin(mid, dialect).label("market_bin")
    statement = (
        select(
            checkpoints.c.rem_s,
            model_bin,
            market_bin,
            func.count(),
            *_terms(p, up),
            *_terms(mid, up),
            func.sum(up),
        )
        .select_from(windows.join(checkpoints, checkpoints.c.slug == windows.c.slug))
        .where(*_where(track, since, until), windows.c.outcome.is_not(None))
        .where(checkpoints.c.rem_s.in_(SPANS[track.window].rems))
        .group_by(checkpoints.c.rem_s, model_bin, market_bin)
    )
    return list(conn.execute(statement))


def window_counts(conn: Connection, track: Track, since: int | None) -> Any:
    """(windows recorded, windows with an outcome, first start, last start)."""
    statement = select(
        func.count(),
        func.count(windows.c.outcome),
        func.min(windows.c.window_start),
        func.max(windows.c.window_start),
    ).where(*_where(track, since))
    return conn.execute(statement).one()


def _reliability(bins: list[Bin]) -> list[dict[str, Any]]:
    """``scores.reliability``'s table from each bin's sums."""
    count = len(bins)
    return [
        {
            "lo": i / count,
            "hi": (i + 1) / count,
            "n": b.n,
            "meanP": b.p / b.n if b.n else None,
            "observed": b.up / b.n if b.n else None,
        }
        for i, b in enumerate(bins)
    ]


def _difference(rem: Rem) -> dict[str, Any]:
    mine, theirs = rem.model_both.means(), rem.market_both.means()
    found: dict[str, Any] = {"n": rem.model_both.n}
    for name in ("brier", "logLoss"):
        a, b = mine[name], theirs[name]
        found[name] = a - b if a is not None and b is not None else None
    return {"brier": found["brier"], "logLoss": found["logLoss"], "n": found["n"]}


def score(rows: list[Any], window: str) -> dict[str, Any]:
    """``summary.summarize``'s answer (buckets, overall, reliability, reliabilityMarket) from
    ``rem_table``'s rows of a record of ``window``'s length (scored at its checkpoints)."""
    rems = {rem: Rem() for rem in SPANS[window].rems}
    model_bins = [Bin() for _ in range(scores.BINS)]
    market_bins = [Bin() for _ in range(scores.BINS)]
    for rem_s, model_bin, market_bin, n, *sums, ups in rows:
        m_brier, m_log, m_p, k_brier, k_log, k_p = sums
        rem = rems[rem_s]
        if model_bin is not None:
            rem.model.add(n, m_brier, m_log)
            _into(model_bins, model_bin, n, m_p, ups)
        if market_bin is not None:
            rem.market.add(n, k_brier, k_log)
            _into(market_bins, market_bin, n, k_p, ups)
        if model_bin is not None and market_bin is not None:
            rem.model_both.add(n, m_brier, m_log)
            rem.market_both.add(n, k_brier, k_log)
    buckets = [
        {
            "remS": rem_s,
            "n": rem.model.n,
            "model": rem.model.means(),
            "nMarket": rem.market.n,
            "market": rem.market.means(),
            "difference": _difference(rem),
            "both": {
                "n": rem.model_both.n,
                "model": rem.model_both.means(),
                "market": rem.market_both.means(),
            },
        }
        for rem_s, rem in rems.items()
    ]
    return {
        "buckets": buckets,
        "overall": scores.overall(buckets),
        "reliability": _reliability(model_bins),
        "reliabilityMarket": _reliability(market_bins),
    }


def _into(bins: list[Bin], index: float, n: int, p: float, ups: float) -> None:
    """Add a group to its bin (the last bin includes p = 1, as in ``scores.reliability``)."""
    target = bins[min(int(index), len(bins) - 1)]
    target.n += n
    target.p += p
    target.up += round(ups)


def compute(conn: Connection, track: Track, since: int | None, now: float) -> dict[str, Any]:
    """The scores (``score``) and window counts (``window_counts``) of ``track`` (one
    source's windows of one market and one length) over the windows starting at ``since`` or
    later. Every window when None: the closed months' kept sums (``app.calibration.kept``;
    may write them, and commits on ``conn``) and the rest summed live."""
    if conn.dialect.name == "sqlite":
        sqlite_math(conn.connection.driver_connection)
    recorded, scored, first, last = window_counts(conn, track, since)
    if since is None and first is not None:
        until = kept.closed_before(now)
        rows = kept.rows(conn, track, first, until, rem_table)
        rows += rem_table(conn, track, until)
    else:
        rows = rem_table(conn, track, since)
    return {
        "windowsRecorded": recorded,
        "windows": scored,
        "first": first,
        "last": last,
        **score(rows, track.window),
    }


def sqlite_math(dbapi_connection: Any) -> None:
    """Give an SQLite connection ``ln`` when its library lacks it (SQLite before 3.35, or
    built without SQLITE_ENABLE_MATH_FUNCTIONS)."""
    found = dbapi_connection.execute(
        "SELECT 1 FROM pragma_compile_options WHERE compile_options = 'ENABLE_MATH_FUNCTIONS'"
    ).fetchone()
    if found is None:
        register_math(dbapi_connection)


def register_math(dbapi_connection: Any) -> None:
    """Python's ``ln`` on an SQLite connection (SQLite's: NULL for NULL and for x <= 0)."""
    dbapi_connection.create_function("ln", 1, _ln, deterministic=True)


def _ln(x: float | None) -> float | None:
    return None if x is None or x <= 0 else math.log(x)
