"""What replays' grader calls used (``replay_spend``), so that the cost history shows replays.

Revision ID: 0023
Revises: 0022
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "replay_spend",
        sa.Column("spend_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("usd", sa.Float, nullable=False),
        sa.Column("created_at", UtcTimestamp, nullable=False),
    )
    op.create_index("replay_spend_by_channel", "replay_spend", ["team", "channel", "created_at"])


def downgrade() -> None:
    op.drop_index("replay_spend_by_channel", table_name="replay_spend")
    op.drop_table("replay_spend")
