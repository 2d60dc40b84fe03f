"""alerts and their deliveries

Issue 51: an account's alerts (a line on one market's board of one window kind, a target URL,
its signing secret stored encrypted) and every call made for them (the call's webhook-id is
the delivery's id). Both tables are new; the downgrade drops them.

Revision ID: c51a7e3d9b20
Revises: a7c3e91f5d28
Create Date: 2026-11-29 20:30:00

"""

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = "c51a7e3d9b20"
down_revision = "a7c3e91f5d28"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        "alerts",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("account_id", sa.Integer(), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("symbol", sa.String(length=8), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=False),
        sa.Column("condition", sa.String(length=16), nullable=False),
        sa.Column("level", sa.Float(), nullable=True),
        sa.Column("side", sa.String(length=8), nullable=True),
        sa.Column("format", sa.String(length=8), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("paused_reason", sa.String(length=200), nullable=True),
        sa.Column("secret_encrypted", sa.String(length=256), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["account_id"], ["accounts.id"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alerts_account_id", "alerts", ["account_id"])
    op.create_table(
        "alert_deliveries",
        sa.Column("id", sa.String(length=40), nullable=False),
        sa.Column("alert_id", sa.String(length=32), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("http_status", sa.Integer(), nullable=True),
        sa.Column("latency_ms", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=200), nullable=True),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["alert_id"], ["alerts.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_alert_deliveries_alert_at", "alert_deliveries", ["alert_id", "at"])


def downgrade():
    op.drop_index("ix_alert_deliveries_alert_at", table_name="alert_deliveries")
    op.drop_table("alert_deliveries")
    op.drop_index("ix_alerts_account_id", table_name="alerts")
    op.drop_table("alerts")
