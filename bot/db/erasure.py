"""Erasure: whole threads' data deleted (purge, uninstall, retention), and channels' settings."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import delete, exists, select, tuple_, union, update
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.db.base import StoreBase
from bot.db.runs import RUN_COLUMNS, RunRecord
from bot.db.schema import (
    asker_feedback,
    audits,
    calibration_drops,
    change_proposals,
    channel_replays,
    channel_rubric_versions,
    channel_rubrics,
    channel_settings,
    claims,
    daily_spend,
    evaluations,
    message_changes,
    posted,
    replay_spend,
    review_modes,
    reviews,
    runs,
    shadow_grades,
    shadow_verdicts,
    threads,
    trust_levels,
    trust_thresholds,
    workspace_settings,
)
from bot.db.scope import in_scope
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Tenant

ERASE_BATCH = 200
"""Threads deleted per transaction: bounds the statement size (SQLite caps bound parameters) and how
long the write lock is held, on databases with many threads to delete."""


def _thread_key_columns(table: Any) -> list[Any]:
    """The columns of `table` read into a ThreadKey (every table of a thread's rows has them by
    these names)."""
    return [table.c[name] for name in ThreadKey.__dataclass_fields__]


def _of(table: Any, refs: Sequence[ThreadKey]) -> Any:
    """The condition that a row of `table` belongs to one of the threads `refs`."""
    keys = [tuple(getattr(ref, name) for name in ThreadKey.__dataclass_fields__) for ref in refs]
    return tuple_(*_thread_key_columns(table)).in_(keys)


class ErasureStore(StoreBase):
    """Which threads the bot has data of, and deleting it."""

    async def threads_in(
        self, workspace: Tenant | None, channel: str | None = None, thread_ts: str | None = None
    ) -> list[ThreadKey]:
        """The threads of a workspace (or org), a channel or one thread the bot has data of (None
        matches any)."""
        conditions = in_scope(threads, workspace, channel, None)
        if thread_ts is not None:
            conditions.append(threads.c.thread_ts == thread_ts)
        query = select(*_thread_key_columns(threads)).where(*conditions)
        return [ThreadKey(**row) for row in await self._rows(query)]

    async def enterprises_of(self, team: str) -> list[str]:
        """The Enterprise Grid orgs (`NO_ENTERPRISE`: none) the data of workspace `team` is filed
        under, sorted: one, unless the workspace joined an org while the bot served it; none if the
        bot has no data of it."""
        tables = (threads, channel_rubrics, channel_settings, workspace_settings, replay_spend)
        each = (select(table.c.enterprise).where(table.c.team == team) for table in tables)
        filed = union(*each).subquery()
        return sorted(row["enterprise"] for row in await self._rows(select(filed.c.enterprise)))

    async def idle_threads(self, before: datetime) -> list[ThreadKey]:
        """Threads last active before ``before`` with no run still going (finished threads)."""
        running = exists().where(
            *(runs.c[name] == threads.c[name] for name in ThreadKey.__dataclass_fields__),
            runs.c.finished_at.is_(None),
        )
        query = select(*_thread_key_columns(threads)).where(threads.c.last_activity < before, ~running)
        return [ThreadKey(**row) for row in await self._rows(query)]

    async def threads_with_runs(self, refs: Sequence[ThreadKey]) -> list[ThreadKey]:
        """Those of `refs` the bot ran a request in: each run is an agent session of its thread in
        Slack (see `bot.sessions`), so only these have a session to close when they are deleted."""
        found: list[ThreadKey] = []
        for start in range(0, len(refs), ERASE_BATCH):
            query = select(*_thread_key_columns(runs)).where(_of(runs, refs[start : start + ERASE_BATCH]))
            found += [ThreadKey(**row) for row in await self._rows(query.distinct())]
        return found

    async def erase_threads(self, refs: Sequence[ThreadKey], *, keep_verdicts: bool) -> Counter[str]:
        """Delete the threads' runs, evaluations, audits and shadow grades, posted ledger, dedupe
        records and thread rows, and their reviews (or, ``keep_verdicts``, only the reviews'
        comments); rows deleted per kind."""
        erased: Counter[str] = Counter()
        for start in range(0, len(refs), ERASE_BATCH):
            batch = refs[start : start + ERASE_BATCH]
            async with self._write() as connection:
                erased += await _erase_batch(connection, batch, keep_verdicts=keep_verdicts)
        return erased

    async def prune_spend_history(self, before: datetime) -> Counter[str]:
        """Delete the replays' cost history from before ``before`` and the daily spend counters of
        the UTC days before its day (figures, no text; a person's counter names its user); rows
        deleted per kind."""
        async with self._write() as connection:
            replays = await connection.execute(delete(replay_spend).where(replay_spend.c.created_at < before))
            day = before.astimezone(UTC).date().isoformat()
            counters = await connection.execute(delete(daily_spend).where(daily_spend.c.day < day))
        return Counter({"replay spend": replays.rowcount, "spend counters": counters.rowcount})

    async def erase_channel_settings(self, workspace: Tenant | None, channel: str | None) -> Counter[str]:
        """Delete a channel's (or, with None, every channel of the workspace's) rubric, its versions,
        settings, replay record and replay spend; with no channel, the workspace's own settings too."""
        erased: Counter[str] = Counter()
        async with self._write() as connection:
            for kind, table in (
                ("channel rubrics", channel_rubrics),
                ("channel rubric versions", channel_rubric_versions),
                ("channel settings", channel_settings),
                ("channel replays", channel_replays),
                ("replay spend", replay_spend),
                ("calibration drops", calibration_drops),
                ("trust levels", trust_levels),
                ("trust thresholds", trust_thresholds),
                ("review modes", review_modes),
                ("change proposals", change_proposals),
            ):
                result = await connection.execute(
                    delete(table).where(*in_scope(table, workspace, channel, None))
                )
                erased[kind] += result.rowcount
            if channel is None:  # the whole workspace's: its admins' settings go too
                table = workspace_settings
                result = await connection.execute(
                    delete(table).where(*in_scope(table, workspace, None, None))
                )
                erased["workspace settings"] += result.rowcount
        return erased


async def _erase_batch(
    connection: AsyncConnection, refs: Sequence[ThreadKey], *, keep_verdicts: bool
) -> Counter[str]:
    """Delete one batch of threads' rows (see `Store.erase_threads`) in the connection's transaction."""
    erased: Counter[str] = Counter()

    def of(table: Any) -> Any:
        return _of(table, refs)

    query = select(*RUN_COLUMNS).where(of(runs))
    found = [RunRecord(**row) for row in (await connection.execute(query)).mappings()]
    run_ids = [run.run_id for run in found]
    messages = {ref.message_key(ref.thread_ts) for ref in refs}
    messages |= {run.thread.message_key(run.request_ts) for run in found}
    erased["posted messages"] += (
        await connection.execute(delete(posted).where(posted.c.run_id.in_(run_ids)))
    ).rowcount
    erased["answer feedback"] += (
        await connection.execute(delete(asker_feedback).where(asker_feedback.c.run_id.in_(run_ids)))
    ).rowcount
    erased["runs"] += (await connection.execute(delete(runs).where(runs.c.run_id.in_(run_ids)))).rowcount
    erased["evaluations"] += (await connection.execute(delete(evaluations).where(of(evaluations)))).rowcount
    erased["audits"] += (await connection.execute(delete(audits).where(of(audits)))).rowcount
    for kind, table in (("shadow grades", shadow_grades), ("shadow verdicts", shadow_verdicts)):
        erased[kind] += (await connection.execute(delete(table).where(of(table)))).rowcount
    if keep_verdicts:
        blanked = update(reviews).where(of(reviews), reviews.c.comment != "").values(comment="")
        erased["review comments"] += (await connection.execute(blanked)).rowcount
    else:
        erased["reviews"] += (await connection.execute(delete(reviews).where(of(reviews)))).rowcount
    erased["dedupe records"] += (
        await connection.execute(delete(claims).where(claims.c.key.in_(messages)))
    ).rowcount
    erased["message changes"] += (
        await connection.execute(delete(message_changes).where(of(message_changes)))
    ).rowcount
    erased["threads"] += (await connection.execute(delete(threads).where(of(threads)))).rowcount
    return erased
