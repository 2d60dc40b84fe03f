"""the record's market as a column: calibration_windows.symbol, indexed with window_start

The track record is scored per market and per period by the database (GROUP BY), so one
market's windows of a period must be found without scanning every slug: the market is
stored (upper case, as ``SYMBOLS`` names it), backfilled from each slug's prefix
(``btc-updown-5m-...`` is BTC), and indexed as (source, symbol, window_start).

Revision ID: 9d41c3a7e2b6
Revises: 5b7c2d9e1a40
Create Date: 2026-11-26 10:05:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '9d41c3a7e2b6'
down_revision = '5b7c2d9e1a40'
branch_labels = None
depends_on = None

INDEX = 'ix_calibration_windows_source_symbol_start'


def upgrade():
    op.add_column('calibration_windows', sa.Column('symbol', sa.String(length=16), nullable=True))
    # The slug's first dash-separated part, upper case (each dialect spells "split" its way).
    if op.get_bind().dialect.name == 'postgresql':
        prefix = "split_part(slug, '-', 1)"
    else:
        prefix = "substr(slug, 1, instr(slug, '-') - 1)"
    op.execute(f"UPDATE calibration_windows SET symbol = upper({prefix})")
    op.create_index(INDEX, 'calibration_windows', ['source', 'symbol', 'window_start'])


def downgrade():
    op.drop_index(INDEX, table_name='calibration_windows')
    with op.batch_alter_table('calibration_windows') as batch:
        batch.drop_column('symbol')
