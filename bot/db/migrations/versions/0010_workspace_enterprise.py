"""Rows keyed by workspace and Enterprise Grid org: an ``enterprise`` column beside every ``team``.

Rows from before are a workspace's outside any org (``''``). The tables keyed by team also take the
enterprise into their primary key, so two orgs' rows never collide.

Revision ID: 0010
Revises: 0009
"""

import warnings
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KEYED_BY_TEAM = {
    "threads": ["enterprise", "team", "channel", "thread_ts"],
    "channel_rubrics": ["enterprise", "team", "channel"],
    "channel_settings": ["enterprise", "team", "channel"],
    "channel_rubric_versions": ["enterprise", "team", "channel", "version"],
    "channel_replays": ["enterprise", "team", "channel"],
}
"""Tables whose primary key starts with the team, and their new primary key."""

WITH_TEAM = ("runs", "evaluations", "reviews", "message_changes")
"""The other tables with a team column."""


def upgrade() -> None:
    postgres = op.get_bind().dialect.name == "postgresql"
    for table in WITH_TEAM:
        op.add_column(table, sa.Column("enterprise", sa.Text, nullable=False, server_default=""))
    for table, key in KEYED_BY_TEAM.items():
        # SQLite copies the table to add the column and change its primary key; SQLAlchemy warns
        # that the copy's key differs from the reflected one, which is the point of the copy.
        with warnings.catch_warnings():
            warnings.filterwarnings(
                "ignore", message=".*primary_key=True, not matching", category=sa.exc.SAWarning
            )
            with op.batch_alter_table(table, recreate="always") as batch:
                batch.add_column(sa.Column("enterprise", sa.Text, nullable=False, server_default=""))
                if postgres:
                    batch.drop_constraint(f"{table}_pkey", type_="primary")
                batch.create_primary_key(f"{table}_pkey", key)
