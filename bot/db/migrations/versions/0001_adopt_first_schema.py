"""The bot's first schema, adopting the tables of bot versions from before migrations.

Those versions created these tables with ``CREATE TABLE IF NOT EXISTS`` and kept no version; their
columns are exactly these (timestamps as ISO-8601 text, flags as 0/1 integers, which the
schema's types read). So a table that exists is kept as it is, rows included, and only missing
ones are created: a new database gets all of them, an old SQLite file gets its tables adopted.

Revision ID: 0001
Revises:
"""

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document, UtcTimestamp

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    for name, columns in _tables().items():
        if not inspector.has_table(name):
            op.create_table(name, *columns)
    for index, table, indexed in (
        ("runs_by_thread", "runs", ["thread_id", "finished_at"]),
        ("reviews_by_channel", "reviews", ["team", "channel", "created_at"]),
    ):
        if index not in {existing["name"] for existing in inspector.get_indexes(table)}:
            op.create_index(index, table, indexed)


def _tables() -> dict[str, list[sa.Column[Any] | sa.PrimaryKeyConstraint]]:
    return {
        "claims": [
            sa.Column("key", sa.Text, primary_key=True),
            sa.Column("claimed_at", UtcTimestamp, nullable=False),
        ],
        "threads": [
            sa.Column("team", sa.Text, nullable=False),
            sa.Column("channel", sa.Text, nullable=False),
            sa.Column("thread_ts", sa.Text, nullable=False),
            sa.Column("created_at", UtcTimestamp, nullable=False),
            sa.PrimaryKeyConstraint("team", "channel", "thread_ts"),
        ],
        "channel_rubrics": [
            sa.Column("team", sa.Text, nullable=False),
            sa.Column("channel", sa.Text, nullable=False),
            sa.Column("rubric_text", sa.Text, nullable=False),
            sa.Column("set_by", sa.Text, nullable=False),
            sa.Column("updated_at", UtcTimestamp, nullable=False),
            sa.PrimaryKeyConstraint("team", "channel"),
        ],
        "channel_settings": [
            sa.Column("team", sa.Text, nullable=False),
            sa.Column("channel", sa.Text, nullable=False),
            sa.Column("calibration", sa.Boolean, nullable=False),
            sa.Column("updated_at", UtcTimestamp, nullable=False),
            sa.PrimaryKeyConstraint("team", "channel"),
        ],
        "runs": [
            sa.Column("run_id", sa.Integer, primary_key=True, autoincrement=True),
            sa.Column("thread_id", sa.Text, nullable=False),
            sa.Column("team", sa.Text, nullable=False),
            sa.Column("channel", sa.Text, nullable=False),
            sa.Column("thread_ts", sa.Text, nullable=False),
            sa.Column("request_ts", sa.Text, nullable=False),
            sa.Column("status", sa.Text),
            sa.Column("started_at", UtcTimestamp, nullable=False),
            sa.Column("finished_at", UtcTimestamp),
            sa.Column("acknowledged", sa.Boolean, nullable=False, server_default=sa.false()),
        ],
        "evaluations": [
            sa.Column("grading_run_id", sa.Text, nullable=False),
            sa.Column("iteration", sa.Integer, nullable=False),
            sa.Column("team", sa.Text, nullable=False),
            sa.Column("channel", sa.Text, nullable=False),
            sa.Column("thread_ts", sa.Text, nullable=False),
            sa.Column("message_ts", sa.Text, nullable=False),
            sa.Column("evaluation", Document, nullable=False),
            sa.Column("rubric_text", sa.Text, nullable=False),
            sa.Column("created_at", UtcTimestamp, nullable=False),
            sa.PrimaryKeyConstraint("grading_run_id", "iteration"),
        ],
        "reviews": [
            sa.Column("team", sa.Text, nullable=False),
            sa.Column("channel", sa.Text, nullable=False),
            sa.Column("thread_ts", sa.Text, nullable=False),
            sa.Column("grading_run_id", sa.Text, nullable=False),
            sa.Column("iteration", sa.Integer, nullable=False),
            sa.Column("criterion", sa.Text, nullable=False),
            sa.Column("grader_verdict", sa.Text, nullable=False),
            sa.Column("reviewer_verdict", sa.Text, nullable=False),
            sa.Column("comment", sa.Text, nullable=False),
            sa.Column("reviewer", sa.Text, nullable=False),
            sa.Column("created_at", UtcTimestamp, nullable=False),
            sa.PrimaryKeyConstraint("grading_run_id", "iteration", "criterion", "reviewer"),
        ],
    }
