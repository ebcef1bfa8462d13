"""Who asked for each run and the tokens it used, every version of each channel's default rubric,
and each channel's latest replay.

A channel's current default rubric becomes its version 1, so history starts from what is in force.

Revision ID: 0004
Revises: 0003
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("requester", sa.Text))
    op.add_column("runs", sa.Column("tokens", sa.Integer))
    op.create_index("runs_by_channel", "runs", ["team", "channel", "started_at"])
    op.create_index("runs_by_requester", "runs", ["team", "requester", "started_at"])
    op.create_table(
        "channel_rubric_versions",
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("version", sa.Integer, nullable=False),
        sa.Column("rubric_text", sa.Text),
        sa.Column("set_by", sa.Text, nullable=False),
        sa.Column("created_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("team", "channel", "version"),
    )
    op.execute(
        "INSERT INTO channel_rubric_versions (team, channel, version, rubric_text, set_by, created_at) "
        "SELECT team, channel, 1, rubric_text, set_by, updated_at FROM channel_rubrics"
    )
    op.create_table(
        "channel_replays",
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("started_by", sa.Text, nullable=False),
        sa.Column("started_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("team", "channel"),
    )
