"""Deleting whole threads' data: purge on request, retention's sweep, and uninstall share it.

A thread's data is its checkpointed conversation (every checkpoint, blob and pending write), its
runs, evaluations, posted-message ledger, dedupe records and reviews, and its jobs in PostgreSQL's
queue. Purging a team or channel also deletes its channel rubrics and settings, and the charts the
bot uploaded to Slack about them (`bot.lifecycle.uploads`). Retention keeps review verdicts for the
agreement figures, without their comments (the evaluations they reviewed, with the grader's words,
go with the thread), and deletes the charts older than its period. Purge and retention close the
threads' agent sessions in Slack first (`bot.lifecycle.sessions`); uninstall cannot.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.db.store import Store
from bot.lifecycle.files import empty_write_ahead_log
from bot.lifecycle.sessions import close_sessions
from bot.lifecycle.uploads import ClientFor, delete_uploads
from bot.limits.usage import CHANNEL_USAGE_DAYS
from bot.queue.durable import erase_jobs
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Tenant, tenant_words

logger = logging.getLogger(__name__)

Erased = Counter[str]
"""Rows (or conversations, or jobs) deleted, per kind of data, as `db prune` and `db purge` print them."""

SESSIONS_CLOSED = "agent sessions closed"
"""The kind counting the threads' agent sessions Slack closed (`bot.lifecycle.sessions`)."""


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
    store: Store,
    checkpointer: BaseCheckpointSaver,
    scope: Scope,
    clients: ClientFor | None = None,
    *,
    sessions: bool = True,
) -> Erased:
    """Delete everything the bot keeps of `scope` now, its queued jobs included; for a channel or
    workspace, the charts it uploaded about it too, from Slack with `clients`' tokens. Its threads'
    agent sessions are closed first with those tokens (unless not `sessions`)."""
    refs = await store.threads_in(scope.tenant, scope.channel, scope.thread_ts)
    closed = await _close_sessions(store, clients, refs) if sessions else 0
    erased = await _erase(store, checkpointer, refs, finished_only=False, keep_verdicts=False)
    erased[SESSIONS_CLOSED] += closed
    if scope.thread_ts is None:
        erased += await store.erase_channel_settings(scope.tenant, scope.channel)
        uploads = await store.uploads_in(scope.tenant, scope.channel)
        erased["chart files"] += await delete_uploads(store, clients, uploads)
        await empty_write_ahead_log(checkpointer)
    return erased


async def purge_tenant(
    store: Store, checkpointer: BaseCheckpointSaver, tenant: Tenant, clients: ClientFor | None = None
) -> Erased:
    """Delete a workspace's (or a whole org's) data as it uninstalls the app (or revokes the bot's
    token), with one log line."""
    # Slack revoked the tokens before it told of the uninstall: no agent session can be closed (a
    # call per thread would only be refused), so none is tried.
    erased = await purge(store, checkpointer, Scope(tenant=tenant), clients, sessions=False)
    logger.warning(
        "deleted every thread, rubric and setting of %s: %s", tenant_words(tenant), describe(erased)
    )
    return erased


async def prune(
    store: Store, checkpointer: BaseCheckpointSaver, days: int, clients: ClientFor | None = None
) -> Erased:
    """Delete every finished thread whose last activity is more than `days` days old, its agent
    session closed first; review verdicts stay, without their comments. Charts uploaded more than
    `days` days ago are deleted from Slack: whatever they showed came from threads idle that long.
    Slack is called with `clients`' tokens. The spend history (the replays' cost history, the daily
    spend counters) goes once older than `days` and than the `CHANNEL_USAGE_DAYS` usage shows."""
    now = datetime.now(UTC)
    before = now - timedelta(days=days)
    refs = await store.idle_threads(before)
    closed = await _close_sessions(store, clients, refs)
    erased = await _erase(store, checkpointer, refs, finished_only=True, keep_verdicts=True)
    erased[SESSIONS_CLOSED] += closed
    erased["chart files"] += await delete_uploads(
        store, clients, await store.uploads_in(None, None, before=before)
    )
    erased += await store.prune_spend_history(now - timedelta(days=max(days, CHANNEL_USAGE_DAYS)))
    return erased


async def erase_leftovers(
    store: Store, checkpointer: BaseCheckpointSaver, thread: ThreadKey, clients: ClientFor | None = None
) -> Erased:
    """Delete what a job wrote in `thread` after the thread's data was deleted while it ran (its
    conversation, run, evaluations and posted ledger); review verdicts retention kept stay. With
    `clients` (the job was a run, which set the session ``active`` as it ended, after the purge had
    closed it), the thread's agent session is closed again."""
    closed = await close_sessions(clients, [thread]) if clients is not None else 0
    erased = await _erase(store, checkpointer, [thread], finished_only=False, keep_verdicts=True)
    erased[SESSIONS_CLOSED] += closed
    return erased


async def _close_sessions(store: Store, clients: ClientFor | None, refs: list[ThreadKey]) -> int:
    """Close the agent sessions of those of `refs` that had one (a run), before their records go."""
    return await close_sessions(clients, await store.threads_with_runs(refs))


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
