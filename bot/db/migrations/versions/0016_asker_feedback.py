"""People's 👍/👎 on runs' final answers (``asker_feedback``), one row per run and person.

Revision ID: 0016
Revises: 0015
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "asker_feedback",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("person", sa.Text, nullable=False),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("thread_ts", sa.Text, nullable=False),
        sa.Column("positive", sa.Boolean, nullable=False),
        sa.Column("created_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "person"),
    )
    op.create_index("asker_feedback_by_channel", "asker_feedback", ["team", "channel", "created_at"])


def downgrade() -> None:
    op.drop_index("asker_feedback_by_channel", table_name="asker_feedback")
    op.drop_table("asker_feedback")
