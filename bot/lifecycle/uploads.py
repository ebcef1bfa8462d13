"""Charts forgotten with their data: the files the bot uploaded (`bot.db.uploads`) are deleted from
Slack (``files.delete``) when a purge or uninstall deletes the workspace's or channel's data they
show, and by retention once they are older than the retention period (everything such a chart showed
comes from threads idle that long).

A file Slack no longer has counts as deleted. One Slack would not delete (an uninstalled app's token
is already revoked; Slack unreachable) is named with its id in one warning, so that a workspace admin
can delete it, and its record goes with the rest of the data.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from itertools import groupby

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.store import Store
from bot.db.uploads import UploadedFile
from bot.slack.client import call_each
from bot.vocabulary.workspace import Workspace, tenant_words

logger = logging.getLogger(__name__)

ClientFor = Callable[[Workspace], Awaitable[AsyncWebClient | None]]
"""The Web API client with a workspace's bot token (`WorkspaceClients.client_for`); None when the bot
is no longer installed there."""


def one_client(client: AsyncWebClient) -> ClientFor:
    """`ClientFor` that gives `client` for any workspace: the one a request came with, or the bot's
    own `SLACK_BOT_TOKEN` client."""

    async def client_for(workspace: Workspace) -> AsyncWebClient | None:
        return client

    return client_for


ALREADY_GONE = frozenset({"file_not_found", "file_deleted"})
"""Slack's answers to ``files.delete`` for a file that is not there any more (someone deleted it)."""


async def delete_uploads(store: Store, clients: ClientFor | None, uploads: Sequence[UploadedFile]) -> int:
    """Delete `uploads` from Slack, each with its workspace's token, and forget their records; how
    many Slack deleted (or no longer had). Without `clients` (no Slack at hand) none is deleted."""
    deleted = 0
    by_workspace = groupby(sorted(uploads, key=lambda u: (u.workspace.enterprise, u.workspace.team)),
                           key=lambda u: u.workspace)  # fmt: skip
    for workspace, files in by_workspace:
        ids = [upload.file_id for upload in files]
        client = await clients(workspace) if clients is not None else None
        gone, problem = (
            await _delete_files(client, ids) if client is not None else ([], "no Slack token for it")
        )
        deleted += len(gone)
        if left := [file_id for file_id in ids if file_id not in gone]:
            logger.warning(
                "could not delete %d chart file(s) the bot uploaded to %s from Slack (%s): %s; a workspace "
                "admin can delete them",
                len(left),
                tenant_words(workspace),
                problem,
                ", ".join(left),
            )
    await store.forget_uploads([upload.file_id for upload in uploads])
    return deleted


async def _delete_files(client: AsyncWebClient, file_ids: Sequence[str]) -> tuple[list[str], str]:
    """The files of `file_ids` Slack deleted (or no longer had), and the last refusal's reason."""
    return await call_each(
        file_ids, lambda file_id: client.files_delete(file=file_id), done_anyway=ALREADY_GONE
    )
