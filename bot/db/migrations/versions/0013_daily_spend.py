"""Daily spend counters per person, channel, workspace and deployment, and what each run charged
them: admission updates a counter in one statement instead of counting the day's runs under a lock,
and reserves a run's tokens until it ends.

Revision ID: 0013
Revises: 0012
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "daily_spend",
        sa.Column("day", sa.Text, nullable=False),
        sa.Column("level", sa.Text, nullable=False),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=""),
        sa.Column("team", sa.Text, nullable=False, server_default=""),
        sa.Column("subject", sa.Text, nullable=False, server_default=""),
        sa.Column("requests", sa.Integer, nullable=False, server_default="0"),
        sa.Column("tokens", sa.BigInteger, nullable=False, server_default="0"),
        sa.PrimaryKeyConstraint("day", "level", "enterprise", "team", "subject"),
    )
    op.add_column("runs", sa.Column("charged_tokens", sa.Integer, nullable=False, server_default="0"))
    op.add_column("workspace_settings", sa.Column("daily_tokens_per_workspace", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("workspace_settings") as batch:
        batch.drop_column("daily_tokens_per_workspace")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("charged_tokens")
    op.drop_table("daily_spend")
