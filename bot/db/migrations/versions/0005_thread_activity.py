"""When each thread last saw a message, for retention (``threads.last_activity``).

A thread from before counts as last active when it was created.

Revision ID: 0005
Revises: 0004
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("threads", sa.Column("last_activity", UtcTimestamp))
    op.execute("UPDATE threads SET last_activity = created_at")
    with op.batch_alter_table("threads") as batch:
        batch.alter_column("last_activity", existing_type=UtcTimestamp, nullable=False)
    op.create_index("threads_by_activity", "threads", ["last_activity"])
