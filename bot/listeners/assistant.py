"""The assistant pane's events: it opened (greet it), its channel changed (remember it), a
suggested question asked in it (answer it), and Stop clicked on a thread's agent session (stop its
runs, `bot.sessions`); requests in the pane are messages like any other
(`bot.listeners.events`). The work is `bot.assistant`'s.

Bolt's `Assistant` middleware is not used: it swallows the deletions and edits of messages in
every DM thread, which the bot must see (`bot.lifecycle.forget`); its thread context store is.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_bolt.context.assistant.thread_context_store.default_async_store import (
    DefaultAsyncAssistantThreadContextStore,
)
from slack_sdk.web.async_client import AsyncWebClient

from bot.assistant.pane import answer_question, open_pane
from bot.assistant.prompts import PaneQuestion, pane_question
from bot.listeners.context import event_message, services_of, workspace_of
from bot.sessions.stop import ask_to_stop
from bot.slack.conversation import is_direct_message, is_from_person
from bot.vocabulary.thread import ThreadKey

logger = logging.getLogger(__name__)


def register(app: AsyncApp) -> None:
    """Listen to the pane opening and changing channel, and to the suggested questions asked in it
    (before `bot.listeners.events` registers the message listener, which would take them as requests)."""
    # Greeted before Bolt acks: a delivery Slack repeats finds the pane greeted already.
    app.event("assistant_thread_started", middleware=[greet_before_ack])(_greeted)
    app.event("assistant_thread_context_changed")(on_context_changed)
    app.event("agent_session_stopped")(on_session_stopped)
    app.event("message", matchers=[asks_pane_question])(on_pane_question)


async def greet_before_ack(
    event: dict[str, Any],
    context: AsyncBoltContext,
    client: AsyncWebClient,
    next: Callable[[], Awaitable[None]],
) -> None:
    await open_pane(services_of(context).store, client, workspace_of(context), event)
    await next()


async def _greeted() -> None:
    """The listener of a pane its middleware greeted: Bolt acks the event."""


async def on_context_changed(event: dict[str, Any], context: AsyncBoltContext) -> None:
    """The pane now sits beside another channel: its greeting's metadata says so (Bolt's store)."""
    thread = event.get("assistant_thread") or {}
    if thread.get("channel_id") and thread.get("thread_ts") and thread.get("context"):
        await DefaultAsyncAssistantThreadContextStore(context).save(
            channel_id=thread["channel_id"], thread_ts=thread["thread_ts"], context=thread["context"]
        )


async def on_session_stopped(event: dict[str, Any], context: AsyncBoltContext) -> None:
    """Someone clicked Stop on a thread's agent session: its unfinished runs are asked to stop
    (each then says so in the thread and moves the session on); after the end it changes nothing."""
    channel, thread_ts, user = event.get("channel"), event.get("thread_ts"), event.get("user")
    if not channel or not thread_ts or not user:
        logger.info("ignored an agent_session_stopped event without its thread or person")
        return
    thread = ThreadKey.of(workspace_of(context), str(channel), str(thread_ts))
    if not await ask_to_stop(services_of(context).store, thread, str(user)):
        logger.info("Stop clicked in thread %s with nothing running there", thread.thread_id)


async def asks_pane_question(event: dict[str, Any], context: AsyncBoltContext) -> bool:
    """Whether the event is a person asking a suggested question in a DM thread (the pane's)."""
    return (
        is_direct_message(event)
        and bool(event.get("thread_ts"))
        and is_from_person(event, context.bot_user_id)
        and pane_question(event.get("text") or "") is not None
    )


async def on_pane_question(
    body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    message = event_message(body, event, context)
    question = pane_question(message.text)
    services = services_of(context)
    if question is PaneQuestion.RUBRIC:
        await services.runner.ask_for_request(message)  # the rubric in force, as for an empty mention
    elif question is not None:
        await answer_question(services.store, client, message, question)
