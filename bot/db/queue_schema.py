"""The PostgreSQL job queue's schema: procrastinate's tables and functions, and the trigger that
wakes the workers when a thread's job stops running (the queue itself is `bot.queue.jobs`).

Applied with the bot's own tables by `rubric-bot db upgrade` (`bot.db.admin`), under their lock.
"""

from __future__ import annotations

import psycopg
from procrastinate.schema import SchemaManager

LOCK_RELEASED_TRIGGER = """
CREATE OR REPLACE FUNCTION rubric_bot_notify_lock_released() RETURNS trigger
    LANGUAGE plpgsql
AS $$
DECLARE
    payload TEXT := json_build_object('type', 'job_inserted', 'job_id', OLD.id)::text;
BEGIN
    PERFORM pg_notify('procrastinate_queue_v1#' || OLD.queue_name, payload);
    PERFORM pg_notify('procrastinate_any_queue_v1', payload);
    RETURN NULL;
END;
$$;
DROP TRIGGER IF EXISTS rubric_bot_lock_released ON procrastinate_jobs;
CREATE TRIGGER rubric_bot_lock_released
    AFTER UPDATE OF status OR DELETE ON procrastinate_jobs
    FOR EACH ROW WHEN (old.status = 'doing' AND old.lock IS NOT NULL)
    EXECUTE PROCEDURE rubric_bot_notify_lock_released();
"""
"""Wakes the workers when a job with a lock stops running (finished, deleted or re-queued).
procrastinate notifies them only when a job is inserted, so a thread's next job, held back by the
lock, would otherwise wait for the next poll; this sends procrastinate's own "job inserted"
notification when the lock frees up."""


async def apply_schema(url: str) -> bool:
    """Create procrastinate's tables, functions and our wake-up trigger in `url`'s database if absent;
    whether it created them.

    The caller holds `bot.db.database.schema_lock`, so processes starting together apply it once.
    """
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as connection:
        present = await connection.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")
        row = await present.fetchone()
        if row and row[0]:
            return False
        async with connection.transaction():
            await connection.execute(SchemaManager.get_schema())
            await connection.execute(LOCK_RELEASED_TRIGGER)
        return True
