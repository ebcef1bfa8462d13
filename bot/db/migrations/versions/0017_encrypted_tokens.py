"""Room for encrypted OAuth tokens (`RUBRIC_BOT_ENCRYPTION_KEY`): slack_sdk's token columns hold
200 characters, and a refresh token encrypted with Fernet takes about twice its length. The
columns become unbounded text; the rows are encrypted at start by the process that has the key
(`bot.workspaces.encryption`), not here, since the key may be set long after this migration ran.

Revision ID: 0017
Revises: 0016
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TOKEN_COLUMNS = {
    "slack_installations": ("bot_token", "bot_refresh_token", "user_token", "user_refresh_token"),
    "slack_bots": ("bot_token", "bot_refresh_token"),
}
"""Every stored token column, by table, as migration 0009 made them (String(200))."""


def upgrade() -> None:
    _retype(sa.String(200), sa.Text())


def downgrade() -> None:
    _retype(sa.Text(), sa.String(200))


def _retype(old: sa.types.TypeEngine[str], new: sa.types.TypeEngine[str]) -> None:
    for table, columns in TOKEN_COLUMNS.items():
        with op.batch_alter_table(table) as batch:
            for column in columns:
                batch.alter_column(column, existing_type=old, type_=new)
