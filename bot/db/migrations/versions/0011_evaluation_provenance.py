"""Where each verdict came from: an evaluation's provenance (rubric version, grader model as it
answered, grader instructions hash, calibration examples shown, worker model, bot version).

Evaluations stored before have none; they read as "unknown".

Revision ID: 0011
Revises: 0014b
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from bot.db.schema import Document

revision: str = "0011"
down_revision: str | None = "0014b"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("evaluations", sa.Column("provenance", Document))
