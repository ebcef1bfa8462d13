"""The shadow grader's grades (``shadow_grades``) and verdicts per criterion (``shadow_verdicts``).

Revision ID: 0025
Revises: 0024
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document, UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _thread_columns() -> list[sa.Column[str]]:
    return [
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("thread_ts", sa.Text, nullable=False),
    ]


def upgrade() -> None:
    op.create_table(
        "shadow_grades",
        sa.Column("grading_run_id", sa.Text, nullable=False),
        sa.Column("iteration", sa.Integer, nullable=False),
        *_thread_columns(),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("prompt_hash", sa.Text),
        sa.Column("result", sa.Text, nullable=False),
        sa.Column("evaluation", Document, nullable=False),
        sa.Column("tokens", sa.BigInteger, nullable=False),
        sa.Column("usd", sa.Float),
        sa.Column("created_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("grading_run_id", "iteration"),
    )
    op.create_index("shadow_grades_by_channel", "shadow_grades", ["team", "channel", "created_at"])
    op.create_table(
        "shadow_verdicts",
        sa.Column("grading_run_id", sa.Text, nullable=False),
        sa.Column("iteration", sa.Integer, nullable=False),
        sa.Column("criterion", sa.Text, nullable=False),
        *_thread_columns(),
        sa.Column("verdict", sa.Text, nullable=False),
        sa.Column("live_verdict", sa.Text),
        sa.PrimaryKeyConstraint("grading_run_id", "iteration", "criterion"),
    )


def downgrade() -> None:
    op.drop_table("shadow_verdicts")
    op.drop_index("shadow_grades_by_channel", table_name="shadow_grades")
    op.drop_table("shadow_grades")
