"""Each workspace's own settings over the deployment's defaults (`/rubric admin`).

Revision ID: 0006
Revises: 0005
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document, UtcTimestamp

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "workspace_settings",
        sa.Column("enterprise", sa.Text, nullable=False, server_default=""),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("worker_model", sa.Text),
        sa.Column("grader_model", sa.Text),
        sa.Column("daily_requests_per_user", sa.Integer),
        sa.Column("daily_tokens_per_channel", sa.Integer),
        sa.Column("rubric_editors", Document),
        sa.Column("updated_by", sa.Text, nullable=False),
        sa.Column("updated_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("enterprise", "team"),
    )
