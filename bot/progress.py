"""What a thread shows while the bot works on a request: Slack's thread status, else ⏳.

The thread status (``assistant.threads.setStatus``, sent with Bolt's ``AsyncSetStatus``) says
what is happening now: writing a draft, grading iteration 2/3, revising. Slack shows it under the
thread and clears it whenever the bot posts there (and after two minutes without a post), so it
is set again at each step. Where Slack refuses the status (an app installed without the scope
the method needs, a workspace or conversation that does not support it), the request gets the
⏳ reaction for the whole run instead.
"""

from __future__ import annotations

import logging

from slack_bolt.async_app import AsyncSetStatus
from slack_sdk.web.async_client import AsyncWebClient

from bot.conversation import UserMessage
from bot.slack import SLACK_ERRORS, slack_error

logger = logging.getLogger(__name__)

WORKING_REACTION = "hourglass_flowing_sand"
"""Reaction put on a request while the bot works on it where the thread status is refused."""

DRAFTING = "is writing a draft…"
"""Thread status while the worker writes its first answer (Slack puts the app's name before it)."""

GRADING = "is grading iteration {position}…"
"""Thread status while the grader checks an answer; ``position`` reads like ``2/3``."""

REVISING = "is revising…"
"""Thread status while the worker revises its answer after the grader's feedback."""

CLEARED = ""
"""The empty status, which takes the status off the thread."""


class WorkingIndicator:
    """One run's progress in its thread: call `start` before the run and `stop` after it."""

    def __init__(self, client: AsyncWebClient, request: UserMessage) -> None:
        self._client = client
        self._request = request
        self._set_status = AsyncSetStatus(client, request.channel, request.thread_ts)
        self._reacting = False

    async def start(self) -> None:
        """Show that the worker is drafting; ⏳ on the request where the status is refused."""
        if not await self._show(DRAFTING):
            self._reacting = True
            await react(self._client, "reactions_add", self._request)

    async def grading(self, iteration: int, max_iterations: int) -> None:
        """Show that the grader is checking iteration ``iteration`` (0-based) of ``max_iterations``."""
        await self._show(GRADING.format(position=f"{iteration + 1}/{max_iterations}"))

    async def revising(self) -> None:
        """Show that the worker is revising after the grader's feedback."""
        await self._show(REVISING)

    async def stop(self) -> None:
        """Take the status (or ⏳) off the thread."""
        if self._reacting:
            await react(self._client, "reactions_remove", self._request)
        else:
            await self._show(CLEARED)

    async def _show(self, status: str) -> bool:
        """Set the thread status; False (logged) if Slack refused it or this run uses ⏳."""
        if self._reacting:
            return False
        try:
            await self._set_status(status)
        except SLACK_ERRORS as exc:
            logger.info(
                "thread status refused in %s (%s)%s",
                self._request.thread_id,
                slack_error(exc),
                "; showing ⏳ instead" if status == DRAFTING else "",
            )
            return False
        return True


async def react(client: AsyncWebClient, method: str, request: UserMessage) -> None:
    """Add (``reactions_add``) or remove (``reactions_remove``) ⏳ on a request; failures are logged."""
    try:
        await getattr(client, method)(channel=request.channel, timestamp=request.ts, name=WORKING_REACTION)
    except SLACK_ERRORS as exc:
        logger.warning("Slack %s failed in thread %s: %s", method, request.thread_id, slack_error(exc))
