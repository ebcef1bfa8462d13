"""The assistant pane at work: opened (greeted once), the channel beside one of its threads, its
title, and the answers to the suggested questions.

The channel beside the pane is read back from the greeting's metadata, where Bolt's thread context
store keeps it (`bot.listeners.assistant` saves changes with that store); the runner has no Bolt
context to build the store with, so it reads the greeting itself: the bot's own, and only for a
person who is a member of that channel (its rubric and its report are the channel's business).
"""

from __future__ import annotations

import logging
from typing import Any

from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.report import load_report, report_blocks
from bot.assistant.prompts import (
    PROMPTS_TITLE,
    SET_RUBRIC_HELP,
    SUGGESTED_PROMPTS,
    THREAD_CONTEXT_EVENT,
    PaneQuestion,
    greeting,
)
from bot.db.store import Store
from bot.slack.client import attempt
from bot.slack.conversation import UserMessage
from bot.slack.members import bot_user_id, is_member
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.slack.mrkdwn import truncate
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace

logger = logging.getLogger(__name__)

GREETING_SEARCH = 10
"""Messages at the start of a pane thread searched for the greeting (it is the bot's first reply)."""

TITLE_MAX = 80
"""Longest pane title made from a request: Slack shows it in the pane's history list."""

IM_PREFIX = "D"
"""How Slack's ids of direct-message conversations begin: the pane is one, other channels are not."""


async def open_pane(
    store: Store, client: AsyncWebClient, workspace: Workspace, event: dict[str, Any]
) -> None:
    """Greet a pane that was just opened, once (Slack may deliver the event again), and offer the
    suggested prompts."""
    thread = event.get("assistant_thread") or {}
    channel, thread_ts = thread.get("channel_id"), thread.get("thread_ts")
    if not channel or not thread_ts:
        logger.info("ignored an assistant_thread_started event without its thread")
        return
    key = ThreadKey.of(workspace, channel, thread_ts)
    if not await store.claim(f"assistant:{key.thread_id}"):
        return
    context = {k: str(v) for k, v in (thread.get("context") or {}).items() if v is not None}
    hello = greeting(context.get("channel_id"), context)
    await attempt(
        client.chat_postMessage(channel=channel, thread_ts=thread_ts, **hello, **NO_UNFURLS), "greet the pane"
    )
    await attempt(
        client.assistant_threads_setSuggestedPrompts(
            channel_id=channel,
            thread_ts=thread_ts,
            title=PROMPTS_TITLE,
            prompts=[{"title": p["title"], "message": p["message"]} for p in SUGGESTED_PROMPTS],
        ),
        "offer the pane's suggested prompts",
    )


def in_pane(message: UserMessage) -> bool:
    """Whether `message` may be in an assistant pane: a reply in a thread of a direct message."""
    return message.channel.startswith(IM_PREFIX) and message.ts != message.thread_ts


async def pane_channel(client: AsyncWebClient, message: UserMessage) -> str | None:
    """The channel the pane `message` is in was opened beside, if its person is a member of it;
    None outside a pane, beside a channel the person is not in, or if Slack cannot say (logged).

    Only the bot's own greeting counts: another app's message metadata in the thread says nothing.
    """
    if not in_pane(message):
        return None
    channel = await attempt(_greeted_beside(client, message), f"read the pane thread {message.thread_id}")
    if not channel or not message.user:
        return None
    member = await attempt(
        is_member(client, message.user, channel), f"check {message.user}'s membership of {channel}"
    )
    if not member:
        logger.info(
            "the pane thread %s is beside %s, which its person is not a member of: its rubric is not used",
            message.thread_id,
            channel,
        )
        return None
    return channel


async def _greeted_beside(client: AsyncWebClient, message: UserMessage) -> str | None:
    """The channel the bot's greeting of the pane thread names (what Slack's replies hold of it)."""
    replies = await client.conversations_replies(
        channel=message.channel, ts=message.thread_ts, include_all_metadata=True, limit=GREETING_SEARCH
    )
    own = await bot_user_id(client)
    messages: list[dict[str, Any]] = replies.get("messages", [])
    for reply in messages:
        metadata = reply.get("metadata") or {}
        if reply.get("user") == own and metadata.get("event_type") == THREAD_CONTEXT_EVENT:
            channel = (metadata.get("event_payload") or {}).get("channel_id")
            return str(channel) if channel else None
    return None


async def set_title(client: AsyncWebClient, message: UserMessage) -> None:
    """Title the pane thread after the request that starts its conversation (logged if refused)."""
    title = truncate(" ".join(message.text.split()), TITLE_MAX) or "A request"
    await attempt(
        client.assistant_threads_setTitle(
            channel_id=message.channel, thread_ts=message.thread_ts, title=title
        ),
        f"set the title of the pane thread {message.thread_id}",
    )


async def answer_question(
    store: Store, client: AsyncWebClient, message: UserMessage, question: PaneQuestion
) -> None:
    """Answer a suggested question (other than the rubric's, which the runner answers) in the pane,
    once however often Slack delivers it."""
    if not await store.claim(*message.dedupe_keys):
        return
    answer: SlackMessage = {"text": SET_RUBRIC_HELP}
    if question is PaneQuestion.AGREEMENT:
        channel = await pane_channel(client, message) or message.channel
        report = await load_report(store, workspace=message.workspace, channel=channel, days=None)
        answer = report_blocks(report, channel=channel)
    await attempt(
        client.chat_postMessage(channel=message.channel, thread_ts=message.thread_ts, **answer, **NO_UNFURLS),
        f"answer in the pane thread {message.thread_id}",
    )
