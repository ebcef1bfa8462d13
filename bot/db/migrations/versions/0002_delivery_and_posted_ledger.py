"""Runs' delivery flag, the ledger of posted thread messages, and an index of evaluations by channel.

Bot versions from just before migrations added ``runs.undelivered`` themselves; their files keep it.

Revision ID: 0002
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if "undelivered" not in {column["name"] for column in sa.inspect(op.get_bind()).get_columns("runs")}:
        op.add_column("runs", sa.Column("undelivered", sa.Boolean, nullable=False, server_default=sa.false()))
    op.create_table(
        "posted",
        sa.Column("run_id", sa.Integer, sa.ForeignKey("runs.run_id"), nullable=False),
        sa.Column("iteration", sa.Text, nullable=False),
        sa.Column("part", sa.Integer, nullable=False),
        sa.Column("message_ts", sa.Text, nullable=False),
        sa.Column("posted_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "iteration", "part"),
    )
    op.create_index("evaluations_by_channel", "evaluations", ["team", "channel", "created_at"])
