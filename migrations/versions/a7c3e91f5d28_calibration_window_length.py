"""the record's window length: calibration_windows.window, kept totals per window

Issue 39: 15-minute windows are recorded beside the 5-minute ones, and each length has its
own track record. Each window's length is stored (``window``: ``5m`` or ``15m``, a
``Span.name``); every row recorded before this revision is a 5-minute one (the only length
there was), which the server default fills in. One market's windows of one length in a period
stay an index range: (source, symbol, window, window_start) replaces (source, symbol,
window_start).

The kept totals (a recomputable cache of the record's sums, app/calibration/kept.py) are kept
per window length in two new tables, ``calibration_window_kept_months`` and
``calibration_window_kept_sums``, created empty: the first answer (or ``flask record keep``)
sums the closed months again. The previous release's ``calibration_kept_months`` and
``calibration_kept_sums`` are left as they are: a rollback does not undo a migration, and
that release keeps writing them (its ``ON CONFLICT`` names their key); this release still
counts every 5-minute write in the old months table, so the old sums never go stale
unnoticed. A later revision drops them.

The downgrade drops the new tables and deletes the windows that are not 5-minute ones (with
their checkpoints): the code before this revision could not tell them from the 5-minute
record. Rolling back past this release while 15-minute windows are recorded needs it first
(``flask --app wsgi db downgrade 4e2a9b7c1d03``, docs/deploy.md).

Revision ID: a7c3e91f5d28
Revises: 4e2a9b7c1d03
Create Date: 2026-11-27 09:00:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "a7c3e91f5d28"
down_revision = "4e2a9b7c1d03"
branch_labels = None
depends_on = None

OLD_INDEX = "ix_calibration_windows_source_symbol_start"
INDEX = "ix_calibration_windows_source_symbol_window_start"


def _kept_tables():
    """The kept totals per window length: two tables, empty."""
    key = ["source", "symbol", "window", "month"]
    op.create_table(
        "calibration_window_kept_months",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("symbol", sa.String(length=16), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=False),
        sa.Column("month", sa.BigInteger(), nullable=False),
        sa.Column("changes", sa.BigInteger(), nullable=False),
        sa.Column("kept", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint(*key),
    )
    op.create_table(
        "calibration_window_kept_sums",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("symbol", sa.String(length=16), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=False),
        sa.Column("month", sa.BigInteger(), nullable=False),
        sa.Column("rem_s", sa.Integer(), nullable=False),
        sa.Column("model_bin", sa.Integer(), nullable=False),
        sa.Column("market_bin", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.Column("model_brier", sa.Float(), nullable=True),
        sa.Column("model_log_loss", sa.Float(), nullable=True),
        sa.Column("model_p", sa.Float(), nullable=True),
        sa.Column("market_brier", sa.Float(), nullable=True),
        sa.Column("market_log_loss", sa.Float(), nullable=True),
        sa.Column("market_p", sa.Float(), nullable=True),
        sa.Column("ups", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint(*key, "rem_s", "model_bin", "market_bin"),
    )


def upgrade():
    op.add_column(
        "calibration_windows",
        sa.Column("window", sa.String(length=8), nullable=False, server_default="5m"),
    )
    op.drop_index(OLD_INDEX, table_name="calibration_windows")
    op.create_index(
        INDEX, "calibration_windows", ["source", "symbol", "window", "window_start"]
    )
    _kept_tables()


def downgrade():
    op.drop_table("calibration_window_kept_sums")
    op.drop_table("calibration_window_kept_months")
    windows = sa.table("calibration_windows", sa.column("slug"), sa.column("window"))
    checkpoints = sa.table("calibration_checkpoints", sa.column("slug"))
    longer = sa.select(windows.c.slug).where(windows.c.window != "5m")
    op.execute(checkpoints.delete().where(checkpoints.c.slug.in_(longer)))
    op.execute(windows.delete().where(windows.c.window != "5m"))
    op.drop_index(INDEX, table_name="calibration_windows")
    op.create_index(OLD_INDEX, "calibration_windows", ["source", "symbol", "window_start"])
    with op.batch_alter_table("calibration_windows") as batch:  # SQLite drops columns in a copy
        batch.drop_column("window")
