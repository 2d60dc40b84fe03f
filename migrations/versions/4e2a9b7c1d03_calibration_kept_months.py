"""the record's kept totals: one market's sums per closed month, valid while unchanged

``period=all`` adds the kept sums of closed months to the current month's, instead of
summing a year of checkpoints per answer (app/calibration/kept.py). Both tables start
empty: a month is summed and kept the first time an answer needs it.

Revision ID: 4e2a9b7c1d03
Revises: 8d3f1c6a2b57
Create Date: 2026-11-26 12:50:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "4e2a9b7c1d03"
down_revision = "8d3f1c6a2b57"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "calibration_kept_months",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("symbol", sa.String(length=16), nullable=False),
        sa.Column("month", sa.BigInteger(), nullable=False),
        # Writes into the month so far; the kept sums are valid while `kept` equals it.
        sa.Column("changes", sa.BigInteger(), nullable=False),
        sa.Column("kept", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("source", "symbol", "month"),
    )
    op.create_table(
        "calibration_kept_sums",
        sa.Column("source", sa.String(length=32), nullable=False),
        sa.Column("symbol", sa.String(length=16), nullable=False),
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
        sa.PrimaryKeyConstraint("source", "symbol", "month", "rem_s", "model_bin", "market_bin"),
    )


def downgrade():
    op.drop_table("calibration_kept_sums")
    op.drop_table("calibration_kept_months")
