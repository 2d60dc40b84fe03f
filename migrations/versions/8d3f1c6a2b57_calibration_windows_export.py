"""the record's export: a window's TWAP lookback, and one market's windows by start

Revision ID: 8d3f1c6a2b57
Revises: 9d41c3a7e2b6
Create Date: 2026-11-26 10:10:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '8d3f1c6a2b57'
down_revision = '9d41c3a7e2b6'
branch_labels = None
depends_on = None


def upgrade():
    # Nullable: the windows recorded before it have no lookback to tell (they answer null).
    op.add_column('calibration_windows', sa.Column('lookback_s', sa.Integer(), nullable=True))
    # GET /api/probboard/windows pages one source's windows by start, newest first.
    op.create_index(
        'ix_calibration_windows_source_window_start',
        'calibration_windows',
        ['source', 'window_start'],
    )


def downgrade():
    op.drop_index('ix_calibration_windows_source_window_start', table_name='calibration_windows')
    with op.batch_alter_table('calibration_windows') as batch:  # SQLite drops columns in a copy
        batch.drop_column('lookback_s')
