"""Events: messages and mentions (is it for the bot? dedupe it, queue it), deleted and edited
messages, the Home tab opening, and the app's uninstalling.

Slack delivers a mention twice (`app_mention` and `message`) and retries deliveries it thinks were
lost; both paths claim the same keys, so each person's message is acted on at most once, even
across restarts.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from re import Pattern
from typing import Any

from slack_bolt.async_app import AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.db.database import DatabaseTimeout
from bot.home import publish_home
from bot.lifecycle.erase import purge_tenant
from bot.lifecycle.uploads import one_client
from bot.listeners.context import Services, event_message, services_of, tenant_of, workspace_of
from bot.material.files import shared_files
from bot.material.sources import Sources
from bot.slack.conversation import (
    CHANGED,
    DELETED,
    MAX_INPUT_CHARS,
    is_direct_message,
    is_from_person,
    mentions_bot,
    message_change,
    rubric_directive,
)
from bot.vocabulary.thread import ThreadKey

EventWork = Callable[[dict[str, Any], dict[str, Any], AsyncBoltContext], Awaitable[None]]
"""What the bot does with an event (its body, the event, Bolt's context) before it is acked."""

Next = Callable[[], Awaitable[None]]
"""What Bolt passes a middleware as ``next``: lets the request go on to its listener."""

EventConstraints = dict[str, str | Sequence[str | Pattern[str] | None] | None]
"""What Bolt matches an event by besides its type (its subtype, say), as `app.event` takes it."""

TAKE_SECONDS = 2.0
"""How long an event may wait for the database before Slack is answered 503 (Slack gives up on an
answer after 3 s, and delivers the event again)."""

HOME_TAB = "home"
"""The ``tab`` of an app_home_opened event for the Home tab (the other is ``messages``)."""


def register(app: AsyncApp) -> None:
    """Listen to mentions, to messages (channels, private channels, DMs) and their deletions and
    edits, to the Home tab opening, and to the app's uninstalling or its bot token's revocation."""
    _listen_acking_when_taken(app, "app_mention", on_mention)
    # Before the plain message listener: Bolt gives an event to the first listener that matches.
    _listen_acking_when_taken(app, {"type": "message", "subtype": DELETED}, on_message_deleted)
    _listen_acking_when_taken(app, {"type": "message", "subtype": CHANGED}, on_message_changed)
    _listen_acking_when_taken(app, "message", on_message)
    app.event("app_home_opened")(on_home_opened)
    # Deleted before the ack too: an uninstall the database could not take comes again.
    _listen_acking_when_taken(app, "app_uninstalled", on_app_uninstalled)
    _listen_acking_when_taken(app, "tokens_revoked", on_tokens_revoked)


async def on_message_deleted(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    """A deleted message leaves its thread's stored conversation (see bot.lifecycle.forget); acked
    once that is queued, so Slack delivers it again if it could not be."""
    deleted = message_change(event, workspace=workspace_of(context), bot_user_id=context.bot_user_id or "")
    if deleted is not None:
        await services_of(context).runner.forget(deleted)


async def on_message_changed(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    """An edited request's stored copy takes the new text (see bot.lifecycle.forget); acked once
    that is queued. An edit over the limit is cut there, and its thread is told so."""
    edited = message_change(event, workspace=workspace_of(context), bot_user_id=context.bot_user_id or "")
    if edited is None:
        return
    runner = services_of(context).runner
    await runner.revise(edited)
    if edited.cut_from:
        await runner.submit_edit_notice(
            edited,
            str(event.get("ts") or edited.ts),
            "That edit is too long for me",
            f"It is {edited.cut_from:,} characters; the limit is {MAX_INPUT_CHARS:,}, so I kept only "
            "its start. Shorten it or split it into several messages.",
        )


async def on_app_uninstalled(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    """The workspace (or, for an org-wide installation, the Enterprise Grid org) removed the app:
    its installation goes (OAuth mode: Bolt's own listener), then everything the bot keeps of it.

    Its jobs still queued find no installation and end (see `ThreadRunner`); with one bot token
    they fail on Slack's answer instead. Bolt gives an event to its first listener only, so this one
    calls Bolt's rather than registering it beside (`AsyncApp.enable_token_revocation_listeners`).
    """
    services = services_of(context)
    if services.installations is not None:
        services.installations.forget_token(context)
        await services.installations.revocation.handle_app_uninstalled_events(context)
    # The charts go with the request's token; Slack has revoked it by now, so those it refuses
    # are named in the log for an admin to delete (see bot.lifecycle.uploads). The threads' agent
    # sessions are not closed: no call could be made with a revoked token (see purge_tenant).
    await purge_tenant(services.store, services.checkpointer, tenant_of(context), one_client(context.client))


async def on_tokens_revoked(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    """Tokens were revoked: Bolt forgets them (OAuth mode); a revoked bot token is as uninstalling
    (a revoked user token alone changes nothing here).

    Bolt deletes only the bot's own record for a revoked bot token, leaving the installation (which
    holds that token too) to authorize the workspace still; as an uninstall, all of it goes.
    """
    services = services_of(context)
    bot_revoked = bool(event.get("tokens", {}).get("bot"))
    if services.installations is not None:
        revocation = services.installations.revocation
        await revocation.handle_tokens_revoked_events(event, context)
        if bot_revoked:
            services.installations.forget_token(context)
            await revocation.handle_app_uninstalled_events(context)
    if bot_revoked:
        await purge_tenant(
            services.store, services.checkpointer, tenant_of(context), one_client(context.client)
        )


def _listen_acking_when_taken(app: AsyncApp, event_type: str | EventConstraints, take: EventWork) -> None:
    """Register `take` for `event_type` (a type, or a type and subtype), to run before Bolt acks it.

    Bolt acks an event before its listener runs, and Slack redelivers only an event that is not
    acked with a 2xx: a message the database could not take would be lost. So `take` runs as the
    listener's middleware, which Bolt runs first: when the database fails it raises, Bolt answers
    5xx (and in Socket Mode does not ack; see `bot.slack.client.log_listener_failure`), and Slack
    delivers the event again. Only once `take` has recorded it does the event reach its listener,
    which Bolt acks. `take` has `TAKE_SECONDS`: a database that does not answer (a network
    partition holds its packets) is one that cannot take the event, answered 503 as quickly as
    a database that is down; what `take` started goes on (a claim is shielded), so the event is
    taken once whichever way it ends.
    """

    async def before_ack(
        body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext, next: Next
    ) -> None:
        try:
            async with asyncio.timeout(TAKE_SECONDS):
                await take(body, event, context)
        except TimeoutError as exc:
            raise DatabaseTimeout(f"the database did not answer within {TAKE_SECONDS:g}s") from exc
        await next()

    app.event(event_type, middleware=[before_ack])(_taken)


async def _taken() -> None:
    """The listener of an event its middleware has taken (see `_listen_acking_when_taken`): Bolt acks it."""


async def on_home_opened(event: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient) -> None:
    """Publish the viewer's Home tab (the Messages tab opening is ignored)."""
    if event.get("tab") == HOME_TAB:
        await publish_home(
            client, services_of(context).store, workspace=workspace_of(context), user=event["user"]
        )


async def on_mention(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    """A mention starts (or continues) the conversation in its thread; acked once it is queued."""
    if is_from_person(event, context.bot_user_id):
        await _accept(services_of(context), body, event, context)


async def on_message(body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext) -> None:
    """DMs, mentions, and replies in threads the bot takes part in; acked once queued (or ignored)."""
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
                ThreadKey.of(workspace_of(context), event["channel"], event["thread_ts"])
            )
        )
    )
    if for_bot:
        await _accept(services, body, event, context)


async def _accept(
    services: Services, body: dict[str, Any], event: dict[str, Any], context: AsyncBoltContext
) -> None:
    message = event_message(body, event, context)
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
