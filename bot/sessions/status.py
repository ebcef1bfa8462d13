"""A thread's agent session in Slack (``agents.sessions.setStatus``): ``processing`` while a run
works (which shows Slack's Stop button), ``active`` once it ended, ``closed`` when the thread is
purged.

A workspace whose Slack has no agent sessions (or an app without the Agents & AI Apps feature)
refuses the call: that is logged and the run goes on; the Stop button is then missing, and
`/rubric stop` does its work.
"""

from __future__ import annotations

import logging
from typing import Literal

from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.client import SLACK_ERRORS, describe_error
from bot.slack.conversation import UserMessage
from bot.slack.mrkdwn import truncate
from bot.vocabulary.thread import ThreadKey

logger = logging.getLogger(__name__)

SessionStatus = Literal["processing", "active", "suspended", "closed"]
"""The statuses Slack's agent sessions take."""

SESSION_TITLE_MAX = 200
"""Longest session title Slack takes."""

UNTITLED = "A request"
"""The title of a session whose request has no text (a file alone)."""


async def session_processing(client: AsyncWebClient, request: UserMessage) -> None:
    """The thread's session is working on `request` (made with the request as its title if new)."""
    title = truncate(" ".join(request.text.split()), SESSION_TITLE_MAX) or UNTITLED
    await _set_status(
        client, request.thread, "processing", title=title, initiator_user_id=request.user or None
    )


async def session_active(client: AsyncWebClient, thread: ThreadKey) -> None:
    """The thread's run ended: its session is no longer processing (Slack's Stop button goes)."""
    await _set_status(client, thread, "active")


async def close_session(client: AsyncWebClient, thread: ThreadKey) -> None:
    """The thread was purged: its session is over. Slack's refusal or failure is raised: a purge
    closes many sessions and reports those Slack did not close together (`bot.lifecycle.sessions`)."""
    await _call(client, thread, "closed")


async def _set_status(
    client: AsyncWebClient, thread: ThreadKey, status: SessionStatus, **extra: str | None
) -> None:
    try:
        await _call(client, thread, status, **extra)
    except SLACK_ERRORS as exc:
        logger.info(
            "the agent session of thread %s was not set to %s (%s)",
            thread.thread_id,
            status,
            describe_error(exc),
        )


async def _call(
    client: AsyncWebClient, thread: ThreadKey, status: SessionStatus, **extra: str | None
) -> None:
    await client.agents_sessions_setStatus(
        channel_id=thread.channel, thread_ts=thread.thread_ts, status=status, **extra
    )
