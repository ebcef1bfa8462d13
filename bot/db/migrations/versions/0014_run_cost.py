"""What a run cost in money (``runs.cost_usd``, ``runs.cost_unpriced``) and the tokens it was priced
from, per role and model (``runs.token_usage``), so a later price table can price it again.

Revision ID: 0014
Revises: 0010
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document

revision: str = "0014"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("cost_usd", sa.Float))
    op.add_column("runs", sa.Column("grader_cost_usd", sa.Float))
    op.add_column("runs", sa.Column("cost_unpriced", sa.Boolean, nullable=False, server_default=sa.false()))
    op.add_column("runs", sa.Column("token_usage", Document))
