"""Deletions and edits of messages not applied yet, so a stopping process does not lose them.

Revision ID: 0007
Revises: 0006
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document, UtcTimestamp

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "message_changes",
        sa.Column("change_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("thread_ts", sa.Text, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("change", Document, nullable=False),
        sa.Column("received_at", UtcTimestamp, nullable=False),
    )
