"""One run's streamed message: started in the request's thread, appended to while Slack takes it,
closed with the run's answer.

A stream Slack refuses or ends is not an error: the run goes on without it (logged once, and counted
as ``rubric_bot_stream_fallbacks`` by why, so a burst that meets ``chat.startStream``'s rate limit
shows which runs fell back), and
`finish_stream` puts the answer into the message anyway — ``chat.stopStream`` while it still
streams, else ``chat.update``, else (the message was deleted) a new post.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

from slack_sdk.models.messages.chunk import Chunk
from slack_sdk.web.async_client import AsyncWebClient

from bot.ops import metrics
from bot.slack.client import SLACK_ERRORS, describe_error, refused_for_now
from bot.slack.conversation import UserMessage
from bot.slack.messages import SlackMessage

logger = logging.getLogger(__name__)

TASK_DISPLAY = "plan"
"""How Slack shows the stream's tasks: as one plan (grouped), not a timeline of steps."""


class PlanStream:
    """The streamed message of one run in `request`'s thread (see the module docstring)."""

    def __init__(self, client: AsyncWebClient, request: UserMessage) -> None:
        self._client = client
        self._request = request
        self.ts: str | None = None
        """The streamed message's ts once Slack started it."""
        self._live = False

    async def start(self, chunks: Sequence[Chunk]) -> str | None:
        """Start the stream with `chunks`; its ts, or None (logged) where Slack refuses it."""
        request = self._request
        try:
            response = await self._client.chat_startStream(
                channel=request.channel,
                thread_ts=request.thread_ts,
                recipient_team_id=request.team,
                recipient_user_id=request.user,
                task_display_mode=TASK_DISPLAY,
                chunks=chunks,
            )
        except SLACK_ERRORS as exc:
            for_now = refused_for_now(exc)
            metrics.stream_fell_back("refused_for_now" if for_now else "refused")
            logger.warning(
                "the run in thread %s falls back to plain messages: Slack refused its stream%s (%s)",
                request.thread_id,
                " for now" if for_now else "",
                describe_error(exc),
            )
            return None
        self.ts, self._live = str(response["ts"]), True
        return self.ts

    async def withdraw(self) -> None:
        """Delete the streamed message this run will not use (best effort: what Slack refuses is
        logged) and stream no more."""
        if self.ts is None:
            return
        self._live = False
        try:
            await self._client.chat_delete(channel=self._request.channel, ts=self.ts)
        except SLACK_ERRORS as exc:
            logger.warning(
                "could not delete an unused streamed message in thread %s (%s)",
                self._request.thread_id,
                describe_error(exc),
            )

    async def append(self, chunks: Sequence[Chunk]) -> None:
        """Add `chunks` to the stream while Slack takes them; once it refuses, the stream is over
        for this run (logged), and its answer goes in with `finish_stream`."""
        if not self._live or self.ts is None or not chunks:
            return
        try:
            await self._client.chat_appendStream(channel=self._request.channel, ts=self.ts, chunks=chunks)
        except SLACK_ERRORS as exc:
            self._live = False
            metrics.stream_fell_back("ended")
            logger.info(
                "the stream in thread %s ended (%s); the answer goes into its message when ready",
                self._request.thread_id,
                describe_error(exc),
            )


async def finish_stream(
    client: AsyncWebClient,
    channel: str,
    fallback: Callable[[SlackMessage], Awaitable[str]],
    ts: str,
    payload: SlackMessage,
    chunks: Sequence[Chunk] = (),
) -> str:
    """Put `payload` (the run's first closing message) into the streamed message `ts`, the stream
    closed with `chunks`; the ts it is in.

    ``chat.stopStream`` while Slack still streams it, else ``chat.update``, else a new message with
    `fallback`. What Slack refuses for now is raised (the delivery owes the message and retries).
    """
    try:
        await client.chat_stopStream(
            channel=channel,
            ts=ts,
            chunks=list(chunks) or None,
            blocks=payload.get("blocks"),
            markdown_text=None if payload.get("blocks") else payload["text"],
            metadata=payload.get("metadata"),
        )
        return ts
    except SLACK_ERRORS as exc:
        if refused_for_now(exc):
            raise
        logger.info(
            "could not close the stream in %s with its answer (%s); updating it", channel, describe_error(exc)
        )
    try:
        await client.chat_update(channel=channel, ts=ts, **payload)
        return ts
    except SLACK_ERRORS as exc:
        if refused_for_now(exc):
            raise
        logger.info(
            "could not update the streamed message in %s (%s); posting the answer",
            channel,
            describe_error(exc),
        )
    return await fallback(payload)
