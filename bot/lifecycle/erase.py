"""Deleting whole threads' data: purge on request, retention's sweep, and uninstall share it.

A thread's data is its checkpointed conversation (every checkpoint, blob and pending write), its
runs, evaluations, posted-message ledger, dedupe records and reviews, and its jobs in PostgreSQL's
queue. Purging a team or channel also deletes its channel rubrics and settings, and the charts the
bot uploaded to Slack about them (`bot.lifecycle.uploads`). Retention keeps review verdicts for the
agreement figures, without their comments (the evaluations they reviewed, with the grader's words,
go with the thread), and deletes the charts older than its period.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.db.store import Store
from bot.lifecycle.files import empty_write_ahead_log
from bot.lifecycle.uploads import ClientFor, delete_uploads
from bot.queue.durable import erase_jobs
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Tenant, tenant_words

logger = logging.getLogger(__name__)

Erased = Counter[str]
"""Rows (or conversations, or jobs) deleted, per kind of data, as `db prune` and `db purge` print them."""


@dataclass(frozen=True)
class Scope:
    """What a purge deletes: a workspace's (or an Enterprise Grid org's) data, one channel's, or one
    thread's (a channel's or thread's in whichever workspace has it, unless `tenant` is given too)."""

    tenant: Tenant | None = None
    channel: str | None = None
    thread_ts: str | None = None
    """The thread root's ts; set only together with `channel`."""

    def describe(self) -> str:
        """How a confirmation question or log line names it."""
        where = (
            f" of {tenant_words(self.tenant)}" if self.tenant is not None and self.channel is not None else ""
        )
        if self.thread_ts is not None:
            return f"thread {self.channel}:{self.thread_ts}{where}"
        if self.channel is not None:
            return f"channel {self.channel}{where}"
        return tenant_words(self.tenant)


async def purge(
    store: Store, checkpointer: BaseCheckpointSaver, scope: Scope, clients: ClientFor | None = None
) -> Erased:
    """Delete everything the bot keeps of `scope` now, its queued jobs included; for a channel or
    workspace, the charts it uploaded about it too, from Slack with `clients`' tokens."""
    refs = await store.threads_in(scope.tenant, scope.channel, scope.thread_ts)
    erased = await _erase(store, checkpointer, refs, finished_only=False, keep_verdicts=False)
    if scope.thread_ts is None:
        erased += await store.erase_channel_settings(scope.tenant, scope.channel)
        uploads = await store.uploads_in(scope.tenant, scope.channel)
        erased["chart files"] += await delete_uploads(store, clients, uploads)
        await empty_write_ahead_log(checkpointer)
    return erased


async def purge_tenant(
    store: Store, checkpointer: BaseCheckpointSaver, tenant: Tenant, clients: ClientFor | None = None
) -> Erased:
    """Delete a workspace's (or a whole org's) data (uninstall, revoked token, `db purge --team`),
    with one log line."""
    erased = await purge(store, checkpointer, Scope(tenant=tenant), clients)
    logger.warning(
        "deleted every thread, rubric and setting of %s: %s", tenant_words(tenant), describe(erased)
    )
    return erased


async def prune(
    store: Store, checkpointer: BaseCheckpointSaver, days: int, clients: ClientFor | None = None
) -> Erased:
    """Delete every finished thread whose last activity is more than `days` days old; review
    verdicts stay, without their comments. Charts uploaded more than `days` days ago are deleted from
    Slack with `clients`' tokens: whatever they showed came from threads idle that long."""
    before = datetime.now(UTC) - timedelta(days=days)
    refs = await store.idle_threads(before)
    erased = await _erase(store, checkpointer, refs, finished_only=True, keep_verdicts=True)
    erased["chart files"] += await delete_uploads(
        store, clients, await store.uploads_in(None, None, before=before)
    )
    return erased


async def erase_leftovers(store: Store, checkpointer: BaseCheckpointSaver, thread: ThreadKey) -> Erased:
    """Delete what a job wrote in `thread` after the thread's data was deleted while it ran (its
    conversation, run, evaluations and posted ledger); review verdicts retention kept stay."""
    return await _erase(store, checkpointer, [thread], finished_only=False, keep_verdicts=True)


async def _erase(
    store: Store,
    checkpointer: BaseCheckpointSaver,
    refs: list[ThreadKey],
    *,
    finished_only: bool,
    keep_verdicts: bool,
) -> Erased:
    # The conversations and jobs go first: the thread rows are how a retry finds what is left.
    keys = [ref.thread_id for ref in refs]
    for key in keys:
        await checkpointer.adelete_thread(key)
    erased: Erased = Counter({"conversations": len(keys)})
    erased["jobs"] = await erase_jobs(store.database, keys, finished_only=finished_only)
    erased += await store.erase_threads(refs, keep_verdicts=keep_verdicts)
    await empty_write_ahead_log(checkpointer)
    return erased


def describe(erased: Erased) -> str:
    """The counts as one line: "3 conversations, 5 runs, ..." (kinds with none are left out)."""
    parts = [f"{count} {kind}" for kind, count in erased.items() if count]
    return ", ".join(parts) or "nothing"
