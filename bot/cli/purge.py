"""`rubric-bot db prune` and `rubric-bot db purge`: delete threads' data now, from the terminal.

`prune` runs retention's sweep (threads idle for more than N days); `purge` deletes a team's, a
channel's or a thread's data, as a data-subject request asks. Both print what they deleted, per kind.
Slack is called with the tokens the bot has (`SLACK_BOT_TOKEN`, or in OAuth mode the stored
installations, read from the database as `serve` reads them) to delete the charts and close the
threads' agent sessions as the bot itself would; the data goes whether or not Slack answers.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.cli.teams import team_workspace
from bot.config import Settings
from bot.db.database import Database, open_checkpointer
from bot.db.store import Store
from bot.lifecycle.erase import Erased, Scope, prune, purge
from bot.lifecycle.uploads import ClientFor, one_client
from bot.ops.startup import prepare_database
from bot.slack.client import build_client
from bot.vocabulary.workspace import Workspace
from bot.workspaces.clients import WorkspaceClients
from bot.workspaces.installations import open_installations

ERASED_KINDS = (
    "conversations",
    "runs",
    "evaluations",
    "posted messages",
    "reviews",
    "review comments",
    "dedupe records",
    "message changes",
    "jobs",
    "threads",
    "channel rubrics",
    "channel rubric versions",
    "channel settings",
    "chart files",
    "agent sessions closed",
)
"""The kinds of data a prune or purge reports, in the order it prints them (review comments are
blanked, not deleted, by prune; chart files are deleted from Slack, and the threads' agent sessions
closed there)."""

CHANNEL_AND_TS = re.compile(r"(?P<channel>[CDG][A-Z0-9]+):(?P<ts>\d+\.\d+)")
"""A thread written as ``CHANNEL:TS``: the channel's id and the thread root's ts."""

MESSAGE_LINK = re.compile(
    r"https://[^/\s]+/archives/(?P<channel>[CDG][A-Z0-9]+)/p(?P<seconds>\d{10})(?P<micros>\d{6})"
)
"""A Slack message link (Copy link): ``https://TEAM.slack.com/archives/CHANNEL/p<ts without its dot>``;
a reply's link adds ``?thread_ts=ROOT_TS`` naming its thread."""

THREAD_TS_PARAMETER = re.compile(r"[?&]thread_ts=(?P<ts>\d+\.\d+)")
"""The thread root a reply's link names."""


def thread_link(text: str) -> tuple[str, str]:
    """The channel and thread root ts of a Slack message link or ``CHANNEL:TS`` (argparse type)."""
    text = text.strip()
    if plain := CHANNEL_AND_TS.fullmatch(text):
        return plain["channel"], plain["ts"]
    if link := MESSAGE_LINK.match(text):
        root = THREAD_TS_PARAMETER.search(text)
        return link["channel"], root["ts"] if root else f"{link['seconds']}.{link['micros']}"
    raise argparse.ArgumentTypeError(
        f"{text!r} is neither a Slack message link "
        "(https://TEAM.slack.com/archives/C0123ABCD/p1700000000123456) "
        "nor CHANNEL:TS (C0123ABCD:1700000000.123456)"
    )


def non_negative_days(text: str) -> int:
    """A whole number of days, 0 or more (argparse type)."""
    if not text.isdecimal():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of days (0 or more)")
    return int(text)


async def prune_database(database: Database, days: int, settings: Settings) -> Erased:
    """Delete every finished thread idle for more than `days` days from `database`, and the charts
    uploaded as long ago from Slack (with the tokens `settings` give)."""
    async with slack_clients(settings) as clients:
        return await _with_data(
            database, lambda store, checkpointer: prune(store, checkpointer, days, clients)
        )


async def purge_database(database: Database, scope: Scope, settings: Settings) -> Erased:
    """Delete everything `database` keeps of `scope`, its charts in Slack included (with the tokens
    `settings` give)."""
    async with slack_clients(settings) as clients:
        return await _with_data(
            database, lambda store, checkpointer: purge(store, checkpointer, scope, clients)
        )


@asynccontextmanager
async def slack_clients(settings: Settings) -> AsyncIterator[ClientFor | None]:
    """Each workspace's Web API client as the bot has it: `SLACK_BOT_TOKEN`'s, or in OAuth mode the
    installation's (read from `RUBRIC_BOT_DB`); None without either (charts are then named in a
    warning instead of deleted, and agent sessions counted in one as left open)."""
    if settings.slack_bot_token is None and not settings.oauth:
        yield None
        return
    client = build_client(settings)
    if not settings.oauth:
        yield one_client(client)
        return
    async with open_installations(settings, client) as installations:
        yield WorkspaceClients(client, installations).client_for


async def threads_of(database: Database, scope: Scope) -> int:
    """How many threads of `scope` the database has data of (for the confirmation question)."""
    async with _store(database) as store:
        return len(await store.threads_in(scope.tenant, scope.channel, scope.thread_ts))


async def team_of(database: Database, team: str, enterprise: str | None) -> Workspace:
    """The workspace `--team` and `--enterprise` name (see `bot.cli.teams`)."""
    async with _store(database) as store:
        return await team_workspace(store, team, enterprise)


@asynccontextmanager
async def _store(database: Database) -> AsyncIterator[Store]:
    store = await Store.open(database)
    try:
        yield store
    finally:
        await store.close()


async def _with_data(
    database: Database, erase: Callable[[Store, BaseCheckpointSaver], Awaitable[Erased]]
) -> Erased:
    async with _opened(database) as (store, checkpointer):
        return await erase(store, checkpointer)


@asynccontextmanager
async def _opened(database: Database) -> AsyncIterator[tuple[Store, BaseCheckpointSaver]]:
    await prepare_database(database, wait=False)  # the checkpointer's tables must exist to delete from
    store = await Store.open(database, upgraded=True)
    try:
        async with open_checkpointer(database) as checkpointer:
            yield store, checkpointer
    finally:
        await store.close()


def erased_lines(erased: Erased) -> list[str]:
    """One line per kind of data: how many were deleted (or blanked)."""
    width = max(map(len, ERASED_KINDS))
    return [f"  {kind + ':':<{width + 1}} {erased.get(kind, 0)}" for kind in ERASED_KINDS]
