"""What each run added to the day's money counters (``runs.charged_usd``): the cost it reserved at
admission until it ends, then its recorded cost, so a burst cannot start more runs than a money
budget holds. Runs that ended before it charged their recorded cost. And the ledger's messages by
ts (``posted_by_message``), so the export finds each evaluation message's run and its cost.

Revision ID: 0015
Revises: 0011
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("charged_usd", sa.Float, nullable=False, server_default="0"))
    op.execute("UPDATE runs SET charged_usd = cost_usd WHERE cost_usd IS NOT NULL")
    op.create_index("posted_by_message", "posted", ["message_ts"])


def downgrade() -> None:
    op.drop_index("posted_by_message", table_name="posted")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("charged_usd")
