"""Grading changes held for a replay (``change_proposals``), and each applied change's replay summary
on its rubric version or calibration drop (``replay_summary``).

Revision ID: 0026
Revises: 0025
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "change_proposals",
        sa.Column("proposal_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("candidate", sa.Text),
        sa.Column("base", sa.Text),
        sa.Column("proposed_by", sa.Text, nullable=False),
        sa.Column("status", sa.Text, nullable=False),
        sa.Column("summary", sa.Text),
        sa.Column("message_ts", sa.Text),
        sa.Column("decided_by", sa.Text),
        sa.Column("created_at", UtcTimestamp, nullable=False),
        sa.Column("decided_at", UtcTimestamp),
    )
    op.create_index("change_proposals_by_channel", "change_proposals", ["team", "channel", "created_at"])
    op.add_column("channel_rubric_versions", sa.Column("replay_summary", sa.Text))
    op.add_column("calibration_drops", sa.Column("replay_summary", sa.Text))


def downgrade() -> None:
    with op.batch_alter_table("calibration_drops") as table:
        table.drop_column("replay_summary")
    with op.batch_alter_table("channel_rubric_versions") as table:
        table.drop_column("replay_summary")
    op.drop_index("change_proposals_by_channel", table_name="change_proposals")
    op.drop_table("change_proposals")
