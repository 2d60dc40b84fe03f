"""the record's window length: calibration_windows.window, kept totals per window

Issue 39: 15-minute windows are recorded beside the 5-minute ones, and each length has its
own track record. Each window's length is stored (``window``: ``5m`` or ``15m``, a
``Span.name``); every row recorded before this revision is a 5-minute one (the only length
there was), which the server default fills in. One market's windows of one length in a period
stay an index range: (source, symbol, window, window_start) replaces (source, symbol,
window_start).

The kept totals (``calibration_kept_months``, ``calibration_kept_sums``) are a recomputable
cache of the record's sums (app/calibration/kept.py): they are dropped and recreated, empty,
with ``window`` in their key; the first answer (or ``flask record keep``) sums the closed
months again. The downgrade does the same without ``window``, and deletes the windows that
are not 5-minute ones (with their checkpoints): the code before this revision could not tell
them from the 5-minute record.

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


def _kept_tables(with_window):
    """The kept totals' two tables, empty; ``window`` in their key when ``with_window``."""
    def window():  # a new Column per table: a Column belongs to one table
        return [sa.Column("window", sa.String(length=8), nullable=False)] if with_window else []

    key = ["source", "symbol", *(["window"] if with_window else []), "month"]
    op.create_table(
        "calibration_kept_months",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("symbol", sa.String(length=16), nullable=False),
        *window(),
        sa.Column("month", sa.BigInteger(), nullable=False),
        sa.Column("changes", sa.BigInteger(), nullable=False),
        sa.Column("kept", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint(*key),
    )
    op.create_table(
        "calibration_kept_sums",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("symbol", sa.String(length=16), nullable=False),
        *window(),
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


def _drop_kept_tables():
    op.drop_table("calibration_kept_sums")
    op.drop_table("calibration_kept_months")


def upgrade():
    op.add_column(
        "calibration_windows",
        sa.Column("window", sa.String(length=8), nullable=False, server_default="5m"),
    )
    op.drop_index(OLD_INDEX, table_name="calibration_windows")
    op.create_index(
        INDEX, "calibration_windows", ["source", "symbol", "window", "window_start"]
    )
    _drop_kept_tables()
    _kept_tables(with_window=True)


def downgrade():
    _drop_kept_tables()
    _kept_tables(with_window=False)
    windows = sa.table("calibration_windows", sa.column("slug"), sa.column("window"))
    checkpoints = sa.table("calibration_checkpoints", sa.column("slug"))
    longer = sa.select(windows.c.slug).where(windows.c.window != "5m")
    op.execute(checkpoints.delete().where(checkpoints.c.slug.in_(longer)))
    op.execute(windows.delete().where(windows.c.window != "5m"))
    op.drop_index(INDEX, table_name="calibration_windows")
    op.create_index(OLD_INDEX, "calibration_windows", ["source", "symbol", "window_start"])
    with op.batch_alter_table("calibration_windows") as batch:  # SQLite drops columns in a copy
        batch.drop_column("window")
