"""What a thread shows while the bot works on a request: Slack's thread status, else ⏳.

The thread status (``assistant.threads.setStatus``, sent with Bolt's ``AsyncSetStatus``) says
what is happening now: writing a draft, grading iteration 2/3, revising. Slack shows it under the
thread and clears it whenever the bot posts there (and after two minutes without a post), so it
is set again at each step. Where Slack refuses the status (an app installed without the scope
the method needs, a workspace or conversation that does not support it), the request gets the
⏳ reaction for the whole run instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_bolt.async_app import AsyncSetStatus
from slack_sdk.web.async_client import AsyncWebClient

from bot.slack.client import attempt
from bot.slack.conversation import UserMessage
from grading import RubricEvaluation

WORKING_REACTION = "hourglass_flowing_sand"
"""Reaction put on a request while the bot works on it where the thread status is refused."""

DRAFTING = "is writing a draft…"
"""Thread status while the worker writes its first answer (Slack puts the app's name before it)."""

GRADING = "is grading iteration {position}…"
"""Thread status while the grader checks an answer; ``position`` reads like ``2/3``."""

REVISING = "is revising…"
"""Thread status while the worker revises its answer after the grader's feedback."""

WRITING_MESSAGES = [
    "Reading what you shared…",
    "Writing an answer…",
    "Checking it against each criterion before the grader does…",
]
"""What Slack rotates under the status while the worker writes (a draft or a revision): shown
verbatim, where the status text itself is fixed."""

REVISING_MESSAGES = [
    "Reading the grader's gaps…",
    "Revising the answer…",
    "Keeping what already passed…",
]
"""What Slack rotates under the status while the worker revises after the grader's feedback."""

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
        if not await self._show(DRAFTING, WRITING_MESSAGES):
            self._reacting = True
            await react(self._client, "reactions_add", self._request)

    async def run_started(self) -> None:
        """The run's attempt holds the run and starts working (the status shows it already)."""

    async def drafting(self) -> None:
        """Show again that the worker is drafting, after a post in the thread took the status off."""
        await self._show(DRAFTING, WRITING_MESSAGES)

    async def reading(self, files: Sequence[tuple[str, str | None]], thread_messages: int) -> None:
        """The worker read what the request shared (the status does not say so; a plan does)."""

    async def grading(self, iteration: int, max_iterations: int) -> None:
        """Show that the grader is checking iteration ``iteration`` (0-based) of ``max_iterations``."""
        await self._show(GRADING.format(position=f"{iteration + 1}/{max_iterations}"))

    async def graded(self, evaluation: RubricEvaluation) -> None:
        """The grader graded an iteration (its message says how it did)."""

    async def revising(self, evaluation: RubricEvaluation) -> None:
        """Show that the worker is revising after the grader's `evaluation`."""
        await self._show(REVISING, REVISING_MESSAGES)

    async def stop(self, *, posted_last: bool = False) -> None:
        """Take the status (or ⏳) off the thread; `posted_last` when the run's last step was a post
        in the thread, which took the status off already (Slack clears it on every post)."""
        if self._reacting:
            await react(self._client, "reactions_remove", self._request)
        elif not posted_last:
            await self._show(CLEARED)

    async def _show(self, status: str, loading_messages: list[str] | None = None) -> bool:
        """Set the thread status (with `loading_messages` rotating under it, if given); False
        (logged) if Slack refused it or this run uses ⏳."""
        if self._reacting:
            return False
        shown = await attempt(
            self._set_status(status, loading_messages=loading_messages),
            f"set the thread status in {self._request.thread_id}",
        )
        return shown is not None


async def react(client: AsyncWebClient, method: str, request: UserMessage) -> None:
    """Add (``reactions_add``) or remove (``reactions_remove``) ⏳ on a request; failures are logged."""
    call = getattr(client, method)(channel=request.channel, timestamp=request.ts, name=WORKING_REACTION)
    await attempt(call, f"{method} ⏳ in thread {request.thread_id}")


async def clear_status(client: AsyncWebClient, request: UserMessage) -> None:
    """Take the thread status off `request`'s thread (where no post in it did); failures are logged."""
    await attempt(
        AsyncSetStatus(client, request.channel, request.thread_ts)(CLEARED),
        f"clear the thread status in {request.thread_id}",
    )
