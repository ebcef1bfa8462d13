"""Events: messages and mentions (is it for the bot? dedupe it, queue it), deleted and edited
messages, the Home tab opening, and the app's uninstalling.

Slack delivers a mention twice (`app_mention` and `message`) and retries deliveries it thinks were
lost; both paths claim the same keys, so each person's message is acted on at most once, even
across restarts.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from re import Pattern
from typing import Any, cast

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_bolt.listener_matcher import builtins as builtin_matchers
from slack_bolt.listener_matcher.async_listener_matcher import AsyncListenerMatcher
from slack_sdk.web.async_client import AsyncWebClient

from bot.home import publish_home
from bot.lifecycle.erase import purge_team
from bot.listeners.context import Services, services_of, workspace_of
from bot.material.files import shared_files
from bot.material.sources import Sources
from bot.threads.conversation import (
    CHANGED,
    DELETED,
    MAX_INPUT_CHARS,
    ThreadKey,
    is_direct_message,
    is_from_person,
    mentions_bot,
    message_change,
    rubric_directive,
    user_message,
)

EventListener = Callable[..., Awaitable[None]]
"""A Bolt event listener (Bolt passes the arguments it names)."""

EventConstraints = dict[str, str | Sequence[str | Pattern[str] | None] | None]
"""What Bolt matches an event by besides its type (its subtype, say), as `app.event` takes it."""

HOME_TAB = "home"
"""The ``tab`` of an app_home_opened event for the Home tab (the other is ``messages``)."""


def register(app: AsyncApp) -> None:
    """Listen to mentions, to messages (channels, private channels, DMs) and their deletions and
    edits, to the Home tab opening, and to the app's uninstalling or its bot token's revocation."""
    _listen_acking_when_queued(app, "app_mention", on_mention)
    # Before the plain message listener: Bolt gives an event to the first listener that matches.
    _listen_acking_when_queued(app, {"type": "message", "subtype": DELETED}, on_message_deleted)
    _listen_acking_when_queued(app, {"type": "message", "subtype": CHANGED}, on_message_changed)
    _listen_acking_when_queued(app, "message", on_message)
    app.event("app_home_opened")(on_home_opened)
    app.event("app_uninstalled")(on_app_uninstalled)
    app.event("tokens_revoked")(on_tokens_revoked)


async def on_message_deleted(ack: AsyncAck, event: dict[str, Any], context: AsyncBoltContext) -> None:
    """A deleted message leaves its thread's stored conversation (see bot.lifecycle.forget); acked
    once that is queued, so Slack delivers it again if it could not be."""
    deleted = message_change(event, team=workspace_of(context), bot_user_id=context.bot_user_id or "")
    if deleted is not None:
        await services_of(context).runner.forget(deleted)
    await ack()


async def on_message_changed(ack: AsyncAck, event: dict[str, Any], context: AsyncBoltContext) -> None:
    """An edited request's stored copy takes the new text (see bot.lifecycle.forget); acked once
    that is queued."""
    edited = message_change(event, team=workspace_of(context), bot_user_id=context.bot_user_id or "")
    if edited is not None:
        await services_of(context).runner.revise(edited)
    await ack()


async def on_app_uninstalled(context: AsyncBoltContext) -> None:
    """The workspace removed the app: delete everything the bot keeps of it."""
    services = services_of(context)
    await purge_team(services.store, services.checkpointer, workspace_of(context))


async def on_tokens_revoked(event: dict[str, Any], context: AsyncBoltContext) -> None:
    """The bot token was revoked: as uninstalling (a revoked user token alone changes nothing here)."""
    if event.get("tokens", {}).get("bot"):
        await on_app_uninstalled(context)


def _listen_acking_when_queued(
    app: AsyncApp, event_type: str | EventConstraints, listener: EventListener
) -> None:
    """Register `listener` for `event_type` (a type, or a type and subtype), to ack the event itself
    once the message is queued.

    `app.event` acks an event before its listener runs, and Slack redelivers only an event that is
    not acked with a 2xx: a message the database could not take would be lost. A listener that
    acks itself raises instead when the database fails, and Bolt answers 5xx (see
    `bot.slack.client.log_listener_failure`), so Slack delivers it again. Bolt offers that only
    to other kinds of listeners; this is the registration `app.event` makes, without its ack.
    """
    app._register_listener(
        [listener],
        cast(AsyncListenerMatcher, builtin_matchers.event(event_type, True, base_logger=app._base_logger)),
        None,
        None,
        auto_acknowledgement=False,
    )


async def on_home_opened(event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient) -> None:
    """Publish the viewer's Home tab (the Messages tab opening is ignored)."""
    if event.get("tab") == HOME_TAB:
        await publish_home(client, services_of(context).store, team=workspace_of(context), user=event["user"])


async def on_mention(
    ack: AsyncAck, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
) -> None:
    """A mention starts (or continues) the conversation in its thread; acked once it is queued."""
    if is_from_person(event, context.bot_user_id):
        await _accept(services_of(context), body, event, context)
    await ack()


async def on_message(
    ack: AsyncAck, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
) -> None:
    """DMs, mentions, and replies in threads the bot takes part in; acked once queued (or ignored)."""
    await _take_message(body, event, context)
    await ack()


async def _take_message(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    bot_user_id = context.bot_user_id
    if not is_from_person(event, bot_user_id):
        return
    services = services_of(context)
    for_bot = (
        is_direct_message(event)
        or mentions_bot(event.get("text") or "", bot_user_id or "")
        or (
            bool(event.get("thread_ts"))
            and await services.store.has_thread(
                ThreadKey(workspace_of(context), event["channel"], event["thread_ts"])
            )
        )
    )
    if for_bot:
        await _accept(services, body, event, context)


async def _accept(
    services: Services, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
) -> None:
    message = user_message(
        event,
        team=workspace_of(context),
        bot_user_id=context.bot_user_id or "",
        event_id=body.get("event_id"),
    )
    sources = Sources(files=shared_files(event), bot_user_id=context.bot_user_id or "")
    runner = services.runner
    if len(message.text) > MAX_INPUT_CHARS:
        await runner.submit_notice(
            message,
            "That message is too long for me",
            f"It is {len(message.text):,} characters; the limit is {MAX_INPUT_CHARS:,}. "
            "Shorten it or split it into several messages.",
        )
        return
    rubric = rubric_directive(message.text)
    if rubric is not None:
        await runner.submit_rubric(message, rubric)
    elif message.text or sources.files:  # a file shared on its own is a request too
        await runner.submit_request(message, sources)
    else:
        await runner.ask_for_request(message)
