"""OAuth states recorded only when used (`bot.workspaces.install_flow`): the install page now issues
a signed, expiring state and writes nothing; the redirect records each state it accepts, and a
unique index on the state refuses a second use (and finds it without reading the whole table).

Rows of the former states (random values, one per install page shown) are deleted: they can no
longer be consumed, so an installer halfway through during the upgrade starts again from the page.

Revision ID: 0018
Revises: 0017
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.execute("DELETE FROM slack_oauth_states")
    op.create_index("slack_oauth_states_state", "slack_oauth_states", ["state"], unique=True)


def downgrade() -> None:
    op.drop_index("slack_oauth_states_state", table_name="slack_oauth_states")
