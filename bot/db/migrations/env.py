"""Alembic's entry point: run the migrations on the connection `bot.db.migrations.upgrade` hands over."""

from alembic import context

from bot.db.migrations import CONNECTION_KEY
from bot.db.schema import metadata

# Batch mode lets SQLite, which cannot ALTER most of a table, take column changes by copying.
context.configure(
    connection=context.config.attributes[CONNECTION_KEY], target_metadata=metadata, render_as_batch=True
)
with context.begin_transaction():
    context.run_migrations()
