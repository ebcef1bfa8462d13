"""A workspace's own number of grader samples per iteration (``workspace_settings.grader_samples``).

Revision ID: 0021
Revises: 0020
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("workspace_settings", sa.Column("grader_samples", sa.Integer))


def downgrade() -> None:
    with op.batch_alter_table("workspace_settings") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("grader_samples")
