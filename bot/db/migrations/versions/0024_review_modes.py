"""How a channel's iterations are reviewed (``review_modes``, each change kept: blind form, share of
double reviews) and how each review was given (``reviews.via``: one-click Agree, form or blind form).

Revision ID: 0024
Revises: 0023
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import UtcTimestamp
from bot.vocabulary.workspace import NO_ENTERPRISE

revision: str = "0024"
down_revision: str | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "review_modes",
        sa.Column("change_id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("enterprise", sa.Text, nullable=False, server_default=NO_ENTERPRISE),
        sa.Column("team", sa.Text, nullable=False),
        sa.Column("channel", sa.Text, nullable=False),
        sa.Column("blind", sa.Boolean, nullable=False),
        sa.Column("double_share", sa.Float, nullable=False),
        sa.Column("set_by", sa.Text, nullable=False),
        sa.Column("created_at", UtcTimestamp, nullable=False),
    )
    op.create_index("review_modes_by_channel", "review_modes", ["team", "channel", "created_at"])
    # Reviews stored before were given with Agree or the pre-set form: which one is not known, so
    # they count as the form's (the report's one-click share is then a floor, never inflated).
    op.add_column("reviews", sa.Column("via", sa.Text, nullable=False, server_default="form"))


def downgrade() -> None:
    with op.batch_alter_table("reviews") as batch:  # SQLite drops a column by copying the table
        batch.drop_column("via")
    op.drop_index("review_modes_by_channel", table_name="review_modes")
    op.drop_table("review_modes")
