"""Trusted calibration and the audit grader: review ids and the reviewer's editor flag, dropped
calibration cases, and audits of finished runs.

Reviews gain ``review_id`` as their key (the old key stays unique) and ``editor`` (false for reviews
from before: they calibrate only where a second reviewer agrees).

Revision ID: 0012
Revises: 0014
"""

import warnings
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document, UtcTimestamp

revision: str = "0012"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

REVIEW_KEY = ["grading_run_id", "iteration", "criterion", "reviewer"]
"""The reviews' key until now: still one row per reviewer, criterion and iteration."""


def upgrade() -> None:
    _number_reviews()
    op.create_table(
        "calibration_drops",
        sa.Column("enterprise", sa.Text, nullable=False, server_default=""),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("grading_run_id", sa.Text, nullable=False),
        sa.Column("iteration", sa.Integer, nullable=False),
        sa.Column("criterion", sa.Text, nullable=False),
        sa.Column("review_id", sa.Integer, nullable=False),
        sa.Column("dropped_by", sa.Text, nullable=False),
        sa.Column("created_at", UtcTimestamp, nullable=False),
        sa.PrimaryKeyConstraint("grading_run_id", "iteration", "criterion"),
    )
    op.create_index("calibration_drops_by_channel", "calibration_drops", ["team", "channel", "created_at"])
    op.create_table(
        "audits",
        sa.Column("run_id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=""),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("thread_ts", sa.Text, nullable=False),
        sa.Column("grading_run_id", sa.Text, nullable=False),
        sa.Column("iterations", sa.Integer, nullable=False),
        sa.Column("loop_passed", sa.Boolean, nullable=False),
        sa.Column("model", sa.Text, nullable=False),
        sa.Column("prompt_hash", sa.Text),
        sa.Column("verdict", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("evaluation", Document),
        sa.Column("tokens", sa.Integer),
        sa.Column("created_at", UtcTimestamp, nullable=False),
    )
    op.create_index("audits_by_channel", "audits", ["team", "channel", "created_at"])


def _number_reviews() -> None:
    """Give every review an id of its own as the table's key, keeping one row per reviewer."""
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE reviews ADD COLUMN review_id SERIAL NOT NULL")
        op.drop_constraint("reviews_pkey", "reviews", type_="primary")
        op.create_primary_key("reviews_pkey", "reviews", ["review_id"])
        op.create_unique_constraint("reviews_one_per_reviewer", "reviews", REVIEW_KEY)
        op.add_column("reviews", sa.Column("editor", sa.Boolean, nullable=False, server_default=sa.false()))
        return
    # SQLite copies the table to change its key; the copy numbers the rows as it fills in. SQLAlchemy
    # warns that the copy's key differs from the reflected one, which is the point of the copy.
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore", message=".*primary_key=True, not matching", category=sa.exc.SAWarning
        )
        with op.batch_alter_table(
            "reviews",
            recreate="always",
            table_args=(sa.UniqueConstraint(*REVIEW_KEY, name="reviews_one_per_reviewer"),),
        ) as batch:
            batch.add_column(sa.Column("review_id", sa.Integer, nullable=False))
            batch.create_primary_key("reviews_pkey", ["review_id"])
            batch.add_column(sa.Column("editor", sa.Boolean, nullable=False, server_default=sa.false()))
