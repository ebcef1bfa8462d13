"""The bot's schema migrations (Alembic), shipped inside the package so an installed bot can run them.

Each file in ``versions/`` moves the bot's tables one step forward; :func:`upgrade` applies those not
yet applied, recording the newest in Alembic's ``alembic_version`` table. Migrations only go forward.
The first one adopts tables that bot versions from before migrations created, keeping their rows.

To write a new one: add ``versions/NNNN_what.py`` with ``revision = "NNNN"`` and ``down_revision``
set to the previous one, change `bot.db.schema` to match, and run the test suite (it checks that a
migrated database matches `bot.db.schema` on SQLite and PostgreSQL).
"""

from __future__ import annotations

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy.engine import Connection

SCRIPT_LOCATION = "bot.db:migrations"
"""Where Alembic finds env.py and versions/: this package, wherever it is installed."""

CONNECTION_KEY = "connection"
"""Key of `Config.attributes` under which env.py finds the connection to migrate."""


def alembic_config(connection: Connection | None = None) -> Config:
    """Alembic's configuration for migrating the database behind ``connection`` (None: scripts only)."""
    config = Config()
    config.set_main_option("script_location", SCRIPT_LOCATION)
    config.attributes[CONNECTION_KEY] = connection
    return config


def upgrade(connection: Connection) -> list[str]:
    """Apply every migration the database lacks, inside the connection's transaction; the revisions
    applied, oldest first (none when it was up to date)."""
    config = alembic_config(connection)
    current = MigrationContext.configure(connection).get_current_revision()
    command.upgrade(config, "head")
    pending = ScriptDirectory.from_config(config).iterate_revisions("head", current)
    return [script.revision for script in reversed(list(pending))]
