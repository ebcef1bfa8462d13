"""Trust levels per channel (``trust_levels``, each change kept) and the confidence thresholds
recalibrated from the channel's trusted reviews (``trust_thresholds``).

Revision ID: 0022
Revises: 0021
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "trust_levels",
        sa.Column("change_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("target", sa.Float),
        sa.Column("set_by", sa.Text, nullable=False),
        sa.Column("created_at", UtcTimestamp, nullable=False),
    )
    op.create_index("trust_levels_by_channel", "trust_levels", ["team", "channel", "created_at"])
    op.create_table(
        "trust_thresholds",
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("grader_model", sa.Text, nullable=False),
        sa.Column("criterion_text", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("target", sa.Float, nullable=False),
        sa.Column("risk", sa.Float, nullable=False),
        sa.Column("threshold", sa.Float),
        sa.Column("reviews", sa.Integer, nullable=False),
        sa.Column("updated_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("enterprise", "team", "channel", "grader_model", "criterion_text"),
    )


def downgrade() -> None:
    op.drop_table("trust_thresholds")
    op.drop_index("trust_levels_by_channel", table_name="trust_levels")
    op.drop_table("trust_levels")
