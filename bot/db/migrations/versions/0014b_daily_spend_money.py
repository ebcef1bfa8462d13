"""The money each budget level spent on a UTC day (``daily_spend.usd``), for the daily budgets in US
dollars (``RUBRIC_BOT_CHANNEL_DAILY_USD`` and the others): a run adds its cost when it ends.

Revision ID: 0014b
Revises: 0013
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014b"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("daily_spend", sa.Column("usd", sa.Float, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("daily_spend") as batch:
        batch.drop_column("usd")
