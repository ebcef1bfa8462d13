"""What each run read besides its request's text: the thread's earlier messages and attached files.

Revision ID: 0003
Revises: 0002
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("thread_messages", sa.Integer))
    op.add_column("runs", sa.Column("files_read", Document))
    op.add_column("runs", sa.Column("files_unread", Document))
