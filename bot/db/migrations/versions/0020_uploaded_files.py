"""Files the bot uploaded to Slack (``uploaded_files``): its charts, kept so that they can be deleted
with the data they show.

Revision ID: 0020
Revises: 0019
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0020"
down_revision: str | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "uploaded_files",
        sa.Column("file_id", sa.Text, primary_key=True),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("purpose", sa.Text, nullable=False),
        sa.Column("digest", sa.Text),
        sa.Column("created_at", UtcTimestamp, nullable=False),
    )
    op.create_index("uploaded_files_by_channel", "uploaded_files", ["team", "channel", "purpose", "digest"])


def downgrade() -> None:
    op.drop_index("uploaded_files_by_channel", table_name="uploaded_files")
    op.drop_table("uploaded_files")
