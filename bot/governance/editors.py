"""Who may change a channel's grading: `RUBRIC_BOT_RUBRIC_EDITORS` (or the workspace's own editors,
set with `/rubric admin`) and the workspace's admins and owners.

Unset, anyone in the channel may (as before the setting existed). Set, only the listed people
(``U…``, ``W…``), the members of the listed user groups (``S…``, read with
``usergroups.users.list``) and the workspace's admins and owners (``users.info``) may. Answers
are cached for `EDITOR_CACHE_SECONDS`, so a burst of commands costs Slack one lookup. A Slack
error during the check refuses (fails closed) with a hint to retry.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from cachetools import TTLCache
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.client import SLACK_ERRORS
from bot.slack.notices import log_failure, reference_words, slack_failure_words
from bot.vocabulary.workspace import Workspace

logger = logging.getLogger(__name__)

EDITOR_CACHE_SECONDS = 60.0
"""How long a user's admin flags and a user group's members are trusted before asking Slack again:
a newly added editor waits at most this long, and a command burst costs one lookup."""

EDITOR_CACHE_SIZE = 4096
"""Most users and user groups cached at once (per process); the oldest go first."""

ADMIN_FLAGS = ("is_admin", "is_owner", "is_primary_owner")
"""The `users.info` flags of a workspace admin or owner."""

USER_GROUP_PREFIX = "S"
"""Slack user-group ids start with this; user ids with ``U`` or ``W``."""


async def is_workspace_admin(client: AsyncWebClient, user: str) -> bool:
    """Whether `user` is an admin or owner of the workspace `client`'s token belongs to (``users.info``).

    Raises what a failed Slack call raises (`bot.slack.client.SLACK_ERRORS`): the caller decides
    how to fail.
    """
    response = await client.users_info(user=user)
    profile = response.get("user") or {}
    return any(bool(profile.get(flag)) for flag in ADMIN_FLAGS)


WorkspaceEditors = Callable[[Workspace], Awaitable[Sequence[str]]]
"""The editors of a workspace: what its admins chose over `RUBRIC_BOT_RUBRIC_EDITORS`
(see `bot.workspaces.settings`); empty: anyone."""


@dataclass(frozen=True)
class EditorList:
    """The people and user groups who may change grading in a workspace (besides its admins)."""

    users: frozenset[str]
    groups: tuple[str, ...]

    @classmethod
    def of(cls, ids: Sequence[str]) -> EditorList:
        return cls(
            frozenset(i for i in ids if not i.startswith(USER_GROUP_PREFIX)),
            tuple(i for i in ids if i.startswith(USER_GROUP_PREFIX)),
        )

    @property
    def restricted(self) -> bool:
        """Whether editors are named at all (otherwise anyone may change grading)."""
        return bool(self.users or self.groups)

    def who_may(self) -> str:
        """Who may change grading, in words with Slack mentions."""
        named = [f"<@{user}>" for user in sorted(self.users)]
        named += [f"members of <!subteam^{group}>" for group in self.groups]
        return ", ".join([*named, "the workspace's admins and owners"])


class RubricEditors:
    """The editors of each workspace and the lookups deciding who is one, cached per workspace."""

    def __init__(
        self,
        ids: Sequence[str],
        *,
        cache_seconds: float = EDITOR_CACHE_SECONDS,
        workspace_editors: WorkspaceEditors | None = None,
    ) -> None:
        """`ids` are the deployment's editors; `workspace_editors`, if given, says a workspace's."""
        self._deployment = EditorList.of(ids)
        self._workspace_editors = workspace_editors
        self._admins: TTLCache[tuple[Workspace, str], bool] = TTLCache(EDITOR_CACHE_SIZE, cache_seconds)
        self._members: TTLCache[tuple[Workspace, str], frozenset[str]] = TTLCache(
            EDITOR_CACHE_SIZE, cache_seconds
        )

    async def editors_of(self, workspace: Workspace) -> EditorList:
        """Who may change grading in `workspace`."""
        if self._workspace_editors is None:
            return self._deployment
        return EditorList.of(await self._workspace_editors(workspace))

    async def may_edit(self, client: AsyncWebClient, workspace: Workspace, user: str) -> bool:
        """Whether `user` may change grading in `workspace`; raises on a failed Slack call."""
        return await self._may_edit(client, workspace, user, await self.editors_of(workspace))

    async def _may_edit(
        self, client: AsyncWebClient, workspace: Workspace, user: str, editors: EditorList
    ) -> bool:
        if not editors.restricted or user in editors.users:
            return True
        for group in editors.groups:
            if user in await self._group_members(client, workspace, group):
                return True
        key = (workspace, user)
        if key not in self._admins:
            self._admins[key] = await is_workspace_admin(client, user)
        return self._admins[key]

    async def _group_members(
        self, client: AsyncWebClient, workspace: Workspace, group: str
    ) -> frozenset[str]:
        key = (workspace, group)
        if key not in self._members:
            response = await client.usergroups_users_list(usergroup=group)
            self._members[key] = frozenset(response.get("users") or [])
        return self._members[key]

    async def is_editor(self, client: AsyncWebClient, workspace: Workspace, user: str) -> bool:
        """Whether `user` is a named editor (or an admin) of `workspace`, whose review may calibrate
        on its own: False where no editors are named (anyone may change grading there, so nobody's
        word counts alone) and when Slack cannot say (logged): trust fails closed like a change does."""
        editors = await self.editors_of(workspace)
        if not editors.restricted:
            return False
        try:
            return await self._may_edit(client, workspace, user, editors)
        except SLACK_ERRORS as exc:
            log_failure(logger, f"checking whether reviewer {user} may change grading", exc, traceback=False)
            return False

    async def refusal(self, client: AsyncWebClient, workspace: Workspace, user: str) -> str | None:
        """None if `user` may change grading; else what to tell them (only they see it)."""
        editors = await self.editors_of(workspace)
        try:
            if await self._may_edit(client, workspace, user, editors):
                return None
        except SLACK_ERRORS as exc:
            reference = log_failure(
                logger, f"checking whether {user} may change grading", exc, traceback=False
            )
            return (
                f"I couldn't check whether you may change how this channel is graded "
                f"({slack_failure_words(exc)}), so nothing was changed. Try again in a minute. "
                f"{reference_words(reference)}"
            )
        return f"Only {editors.who_may()} may change how this channel is graded, so nothing was changed."


ClientFor = Callable[[Workspace], Awaitable[AsyncWebClient | None]]
"""The Slack client of a workspace (None: the bot is no longer installed there)."""


@dataclass(frozen=True)
class EditorsNow:
    """`bot.review.calibration.EditorsNow` from the editors and each workspace's client: who is an
    editor when calibration examples are used, not when their reviews were saved."""

    editors: RubricEditors
    client_for: ClientFor

    async def restricted(self, workspace: Workspace) -> bool:
        return (await self.editors.editors_of(workspace)).restricted

    async def is_editor(self, workspace: Workspace, user: str) -> bool:
        client = await self.client_for(workspace)
        return client is not None and await self.editors.is_editor(client, workspace, user)
