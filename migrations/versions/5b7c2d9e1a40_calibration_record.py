"""the live record: calibration windows and checkpoints

Revision ID: 5b7c2d9e1a40
Revises: e65d4fc1c8af
Create Date: 2026-11-24 02:10:00

"""
from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision = '5b7c2d9e1a40'
down_revision = 'e65d4fc1c8af'
branch_labels = None
depends_on = None


def upgrade():
    op.create_table(
        'calibration_windows',
        sa.Column('slug', sa.String(length=64), nullable=False),
        sa.Column('window_start', sa.BigInteger(), nullable=False),
        sa.Column('source', sa.String(length=32), nullable=False),
        sa.Column('rule', sa.String(length=8), nullable=True),
        sa.Column('price_to_beat', sa.Float(), nullable=True),
        sa.Column('outcome', sa.String(length=4), nullable=True),
        sa.Column('outcome_source', sa.String(length=8), nullable=True),
        sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint('slug'),
    )
    op.create_index(
        op.f('ix_calibration_windows_window_start'), 'calibration_windows', ['window_start']
    )
    op.create_table(
        'calibration_checkpoints',
        sa.Column('slug', sa.String(length=64), nullable=False),
        sa.Column('rem_s', sa.Integer(), nullable=False),
        sa.Column('p_up', sa.Float(), nullable=True),
        sa.Column('market_mid', sa.Float(), nullable=True),
        sa.Column('sigma', sa.Float(), nullable=True),
        sa.Column('price', sa.Float(), nullable=True),
        sa.Column('price_to_beat', sa.Float(), nullable=True),
        sa.Column('recorded_at', sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ['slug'], ['calibration_windows.slug'], ondelete='CASCADE'
        ),
        sa.PrimaryKeyConstraint('slug', 'rem_s'),
    )


def downgrade():
    op.drop_table('calibration_checkpoints')
    op.drop_index(op.f('ix_calibration_windows_window_start'), table_name='calibration_windows')
    op.drop_table('calibration_windows')
