"""Requests as Slack sends them to an app's request URL: payload builders, signing, and a sender.

Builders return the payload as a dict; `encode` turns it into the body Slack would send (JSON for
Events API callbacks, form fields for slash commands, a form-encoded ``payload`` for interactivity)
and `SlackSender` signs and posts it, optionally with a bad signature or Slack's retry headers.
"""

from __future__ import annotations

import itertools
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp
from slack_sdk.signature import SignatureVerifier

from tests.standins.slack_api import BOT_ID, BOT_USER_ID, TEAM_ID
from tests.standins.triggers import HANDED_OUT

Json = dict[str, Any]

DEFAULT_USER = "U1"
"""The human who sends messages and commands unless a test says otherwise."""
APP_ID = "A1"
"""The Slack app id payloads carry."""
VERIFICATION_TOKEN = "legacy-verification-token"
"""Slack still puts the deprecated verification token in payloads; nothing should rely on it."""
UNREACHABLE_RESPONSE_URL = "http://127.0.0.1:9/response-url-not-set"
"""Default response_url: loopback's discard port refuses at once, so a bot using it fails fast
and never reaches the internet. Pass SlackApiStandin.response_url() to record responses instead."""
USER_TS_SECONDS = 1_800_000_000
"""User message timestamps from `new_ts` start here, apart from the ones the Web API stand-in hands out."""
EVENT_CALLBACK_TYPES = frozenset({"event_callback", "url_verification", "app_rate_limited"})
"""Payload types Slack posts as a JSON body; every other non-command payload is interactivity."""

_sequence = itertools.count(1)


def _next() -> int:
    return next(_sequence)


def new_ts() -> str:
    """A fresh, increasing ``ts`` for a user's message."""
    return f"{USER_TS_SECONDS + _next()}.000000"


def new_trigger_id() -> str:
    """A trigger id as Slack hands one out with an interaction: the Slack stand-in opens one view
    with it, soon after (tests.standins.triggers)."""
    return HANDED_OUT.hand_out()


# ----- Events API -----


def event_callback(
    event: Json,
    *,
    team: str = TEAM_ID,
    event_id: str | None = None,
    event_time: int | None = None,
    installed_team: str | None = None,
    enterprise: str | None = None,
    org_wide: bool = False,
    bot_user: str = BOT_USER_ID,
) -> Json:
    """The Events API envelope around `event`; each call gets a new event_id unless one is given.

    `installed_team` (default `team`) is the workspace the app is installed in, which Slack puts
    in ``authorizations``; a different `team` makes it an event from a Slack Connect channel.
    `enterprise` is the Enterprise Grid org, and `org_wide` says the app is installed org-wide (the
    authorization then names the org only). `bot_user` is the installation's bot user.
    """
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team,
        "api_app_id": APP_ID,
        "event": event,
        "type": "event_callback",
        "event_id": event_id or f"Ev{_next():010d}",
        "event_time": event_time or int(time.time()),
        "enterprise_id": enterprise,
        "authorizations": [
            {
                "enterprise_id": enterprise,
                "team_id": None if org_wide else installed_team or team,
                "user_id": bot_user,
                "is_bot": True,
                "is_enterprise_install": org_wide,
            }
        ],
        "is_ext_shared_channel": installed_team not in (None, team),
    }


def url_verification(challenge: str) -> Json:
    """The handshake Slack sends when an app's request URL is configured."""
    return {"token": VERIFICATION_TOKEN, "challenge": challenge, "type": "url_verification"}


def app_mention(
    text: str,
    channel: str,
    ts: str,
    thread_ts: str | None = None,
    user: str = DEFAULT_USER,
    *,
    team: str = TEAM_ID,
    files: list[Json] | None = None,
    bot_user: str = BOT_USER_ID,
) -> Json:
    """An ``app_mention`` event; the text gets a leading ``<@UBOT>`` (the mention of `bot_user`)
    unless it mentions the bot already. `files` are Slack file objects (`SlackApiStandin.add_file`)
    attached to it."""
    mention = f"<@{bot_user}>"
    event: Json = {
        "type": "app_mention",
        "user": user,
        "text": text if mention in text else f"{mention} {text}",
        "ts": ts,
        "channel": channel,
        "event_ts": ts,
        "team": team,
        "client_msg_id": str(uuid.uuid4()),
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if files:
        event["files"] = files
    return event


def assistant_thread(
    kind: str, channel: str, thread_ts: str, beside: str, user: str = DEFAULT_USER, *, team: str = TEAM_ID
) -> Json:
    """An ``assistant_thread_started`` or ``assistant_thread_context_changed`` event (`kind`): the
    assistant pane's thread `thread_ts` in the DM `channel`, opened beside the channel `beside`."""
    return {
        "type": kind,
        "assistant_thread": {
            "user_id": user,
            "context": {"channel_id": beside, "team_id": team, "enterprise_id": None},
            "channel_id": channel,
            "thread_ts": thread_ts,
        },
        "event_ts": new_ts(),
    }


def agent_session_stopped(
    channel: str, thread_ts: str, user: str = DEFAULT_USER, streaming_message_ts: list[str] | None = None
) -> Json:
    """An ``agent_session_stopped`` event: `user` clicked Stop on the agent session of the thread
    `thread_ts`; `streaming_message_ts` are the app's streams Slack stopped with it (maybe none)."""
    return {
        "type": "agent_session_stopped",
        "channel": channel,
        "thread_ts": thread_ts,
        "user": user,
        "streaming_message_ts": list(streaming_message_ts or []),
        "event_ts": new_ts(),
    }


def message(
    text: str,
    channel: str,
    ts: str,
    thread_ts: str | None = None,
    user: str = DEFAULT_USER,
    *,
    channel_type: str = "channel",
    bot_id: str | None = None,
    subtype: str | None = None,
    team: str = TEAM_ID,
    files: list[Json] | None = None,
) -> Json:
    """A ``message`` event: from a person by default, from a bot with `bot_id` and/or `subtype`.

    ``subtype="bot_message"`` leaves out the user, as Slack does for integrations' messages.
    Use `channel_type="im"` for direct messages. `files` (Slack file objects) make it a
    ``file_share``, as Slack sends a message with attachments.
    """
    event: Json = {
        "type": "message",
        "channel": channel,
        "user": user,
        "text": text,
        "ts": ts,
        "event_ts": ts,
        "channel_type": channel_type,
        "team": team,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    if bot_id:
        event["bot_id"] = bot_id
    if files:
        event |= {"files": files, "subtype": subtype or "file_share"}
    if subtype:
        event["subtype"] = subtype
        if subtype == "bot_message":
            del event["user"]
    return event


def app_home_opened(user: str = DEFAULT_USER, tab: str = "home") -> Json:
    """A person opening the app's Home tab (or, with ``tab="messages"``, its Messages tab)."""
    return {"type": "app_home_opened", "user": user, "channel": "D0HOME", "tab": tab, "event_ts": new_ts()}


def bot_message(text: str, channel: str, ts: str, thread_ts: str | None = None) -> Json:
    """The bot's own message coming back as a ``message`` event (the bot must ignore it)."""
    return message(text, channel, ts, thread_ts, user=BOT_USER_ID, bot_id=BOT_ID)


def message_changed(
    text: str,
    channel: str,
    ts: str,
    thread_ts: str | None = None,
    user: str = DEFAULT_USER,
    *,
    previous_text: str = "",
    channel_type: str = "channel",
) -> Json:
    """The ``message_changed`` event Slack sends when a user edits message `ts` to say `text`."""
    edit_ts = new_ts()
    edited: Json = {
        "type": "message",
        "user": user,
        "text": text,
        "ts": ts,
        "edited": {"user": user, "ts": edit_ts},
    }
    previous: Json = {"type": "message", "user": user, "text": previous_text, "ts": ts}
    if thread_ts:
        edited["thread_ts"] = previous["thread_ts"] = thread_ts
    return {
        "type": "message",
        "subtype": "message_changed",
        "hidden": True,
        "channel": channel,
        "channel_type": channel_type,
        "ts": edit_ts,
        "event_ts": edit_ts,
        "message": edited,
        "previous_message": previous,
    }


def message_deleted(
    channel: str, ts: str, thread_ts: str | None = None, user: str = DEFAULT_USER, *, previous_text: str = ""
) -> Json:
    """The ``message_deleted`` event Slack sends when a user deletes `ts` (which said `previous_text`)."""
    deleted_at = new_ts()
    previous: Json = {"type": "message", "user": user, "text": previous_text, "ts": ts}
    if thread_ts:
        previous["thread_ts"] = thread_ts
    return {
        "type": "message",
        "subtype": "message_deleted",
        "hidden": True,
        "channel": channel,
        "channel_type": "channel",
        "ts": deleted_at,
        "event_ts": deleted_at,
        "deleted_ts": ts,
        "previous_message": previous,
    }


def app_uninstalled() -> Json:
    """The ``app_uninstalled`` event: the workspace removed the app."""
    return {"type": "app_uninstalled", "event_ts": new_ts()}


def tokens_revoked(*, bot: bool = True, bot_user: str = BOT_USER_ID) -> Json:
    """The ``tokens_revoked`` event: the token of bot user `bot_user` (or, with `bot=False`, a user
    token) was revoked."""
    tokens = {"bot": [bot_user]} if bot else {"oauth": [DEFAULT_USER]}
    return {"type": "tokens_revoked", "tokens": tokens, "event_ts": new_ts()}


# ----- slash commands and interactivity -----


def slash_command(
    text: str,
    channel: str,
    user: str = DEFAULT_USER,
    command: str = "/rubric",
    response_url: str = UNREACHABLE_RESPONSE_URL,
    *,
    team: str = TEAM_ID,
    trigger_id: str | None = None,
) -> dict[str, str]:
    """The form fields of a slash command invocation."""
    return {
        "token": VERIFICATION_TOKEN,
        "team_id": team,
        "team_domain": "standin",
        "channel_id": channel,
        "channel_name": channel.lower(),
        "user_id": user,
        "user_name": user.lower(),
        "command": command,
        "text": text,
        "api_app_id": APP_ID,
        "is_enterprise_install": "false",
        "response_url": response_url,
        "trigger_id": trigger_id or new_trigger_id(),
    }


def block_actions(
    action_id: str,
    value: str,
    channel: str,
    message_ts: str,
    thread_ts: str | None = None,
    user: str = DEFAULT_USER,
    trigger_id: str | None = None,
    *,
    team: str = TEAM_ID,
    block_id: str = "actions",
    response_url: str = UNREACHABLE_RESPONSE_URL,
) -> Json:
    """A button click on the bot's message `message_ts` (in thread `thread_ts`, if any)."""
    container: Json = {
        "type": "message",
        "message_ts": message_ts,
        "channel_id": channel,
        "is_ephemeral": False,
    }
    clicked: Json = {"type": "message", "ts": message_ts, "user": BOT_USER_ID, "bot_id": BOT_ID, "text": ""}
    if thread_ts:
        container["thread_ts"] = clicked["thread_ts"] = thread_ts
    return {
        "type": "block_actions",
        "user": _user(user, team),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "container": container,
        "trigger_id": trigger_id or new_trigger_id(),
        "team": {"id": team, "domain": "standin"},
        "enterprise": None,
        "is_enterprise_install": False,
        "channel": {"id": channel, "name": channel.lower()},
        "message": clicked,
        "state": {"values": {}},
        "response_url": response_url,
        "actions": [
            {
                "type": "button",
                "action_id": action_id,
                "block_id": block_id,
                "value": value,
                "text": {"type": "plain_text", "text": action_id},
                "action_ts": f"{time.time():.6f}",
            }
        ],
    }


def feedback_click(
    element: Json, positive: bool, channel: str, message_ts: str, thread_ts: str, user: str = DEFAULT_USER
) -> Json:
    """A click on the 👍 (`positive`) or 👎 of a ``feedback_buttons`` `element` of the bot's message."""
    payload = block_actions(
        element["action_id"], "", channel, message_ts, thread_ts, user, block_id="feedback"
    )
    button = element["positive_button" if positive else "negative_button"]
    payload["actions"][0] |= {"type": "feedback_buttons", "value": button["value"], "text": button["text"]}
    return payload


def view_submission(
    callback_id: str,
    state_values: Json,
    private_metadata: str = "",
    user: str = DEFAULT_USER,
    *,
    team: str = TEAM_ID,
    view_id: str | None = None,
) -> Json:
    """A modal's submission; build `state_values` with `text_input` (merge dicts for several inputs)."""
    return {
        "type": "view_submission",
        "team": {"id": team, "domain": "standin"},
        "user": _user(user, team),
        "api_app_id": APP_ID,
        "token": VERIFICATION_TOKEN,
        "trigger_id": new_trigger_id(),
        "view": {
            "id": view_id or f"V{_next():010d}",
            "team_id": team,
            "type": "modal",
            "callback_id": callback_id,
            "private_metadata": private_metadata,
            "title": {"type": "plain_text", "text": callback_id},
            "blocks": [],
            "state": {"values": state_values},
            "hash": f"{_next()}.standin",
            "app_id": APP_ID,
            "bot_id": BOT_ID,
        },
        "response_urls": [],
        "is_enterprise_install": False,
        "enterprise": None,
    }


def text_input(block_id: str, action_id: str, value: str | None) -> Json:
    """View state for one plain-text input: ``{block_id: {action_id: {...}}}``."""
    return {block_id: {action_id: {"type": "plain_text_input", "value": value}}}


def _user(user: str, team: str) -> Json:
    return {"id": user, "username": user.lower(), "name": user.lower(), "team_id": team}


# ----- encoding, signing, sending -----


def encode(payload: Json) -> tuple[bytes, str]:
    """The body and content type Slack uses for this kind of payload."""
    if "command" in payload:
        return urlencode(payload).encode(), "application/x-www-form-urlencoded"
    if payload.get("type") in EVENT_CALLBACK_TYPES:
        return json.dumps(payload).encode(), "application/json"
    return urlencode({"payload": json.dumps(payload)}).encode(), "application/x-www-form-urlencoded"


def sign(body: bytes, secret: str, timestamp: int | None = None) -> dict[str, str]:
    """Slack's signature headers for `body`, signed now (or at `timestamp`) with `secret`."""
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    signature = SignatureVerifier(secret).generate_signature(timestamp=stamp, body=body)
    return {"X-Slack-Request-Timestamp": stamp, "X-Slack-Signature": signature or ""}


@dataclass(frozen=True)
class SlackResponse:
    """The app's answer to one request, and how long the app took to give it."""

    status: int
    body: str
    headers: dict[str, str]
    seconds: float

    def json(self) -> Any:
        return json.loads(self.body)


class SlackSender:
    """Posts signed requests to an app's request URL, as Slack does.

    Options for every send: `bad_signature` (signed with the wrong secret), `timestamp` (e.g. a stale
    one), `retry_num` / `retry_reason` (Slack's redelivery headers), `headers` (set or, with None,
    remove any header after signing: ``{"X-Slack-Signature": None}``). The async methods take an optional
    shared ``aiohttp.ClientSession`` so many requests can go out at once over pooled connections.
    """

    def __init__(self, url: str, secret: str, *, timeout: float = 10.0) -> None:
        self.url = url
        self._secret = secret
        self._timeout = timeout
        # No proxies: the app under test is on loopback, whatever the developer's shell says.
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def send(self, payload: Json, **options: Any) -> SlackResponse:
        """Encode `payload` as Slack would and post it."""
        return self.post(*encode(payload), **options)

    def post(self, body: bytes, content_type: str, **options: Any) -> SlackResponse:
        headers = self._headers(body, content_type, **options)
        request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
        started = time.perf_counter()
        try:
            with self._opener.open(request, timeout=self._timeout) as response:
                text = response.read().decode()
                return SlackResponse(
                    response.status, text, dict(response.headers), time.perf_counter() - started
                )
        except urllib.error.HTTPError as error:  # 4xx/5xx are answers too, e.g. 401 for a bad signature
            text = error.read().decode()
            return SlackResponse(error.code, text, dict(error.headers), time.perf_counter() - started)

    async def send_async(
        self, payload: Json, session: aiohttp.ClientSession | None = None, **options: Any
    ) -> SlackResponse:
        return await self.post_async(*encode(payload), session=session, **options)

    async def post_async(
        self,
        body: bytes,
        content_type: str,
        session: aiohttp.ClientSession | None = None,
        **options: Any,
    ) -> SlackResponse:
        if session is None:
            async with aiohttp.ClientSession() as own:
                return await self.post_async(body, content_type, own, **options)
        headers = self._headers(body, content_type, **options)
        started = time.perf_counter()
        async with session.post(
            self.url, data=body, headers=headers, timeout=aiohttp.ClientTimeout(total=self._timeout)
        ) as response:
            text = await response.text()
            return SlackResponse(response.status, text, dict(response.headers), time.perf_counter() - started)

    def close(self) -> None:
        """Release the synchronous opener's handlers (the async side uses the caller's session)."""
        self._opener.close()

    def _headers(
        self,
        body: bytes,
        content_type: str,
        *,
        bad_signature: bool = False,
        timestamp: int | None = None,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
        headers: Mapping[str, str | None] | None = None,
    ) -> dict[str, str]:
        secret = f"not-{self._secret}" if bad_signature else self._secret
        sent = {"Content-Type": content_type, **sign(body, secret, timestamp)}
        if retry_num is not None:
            sent["X-Slack-Retry-Num"] = str(retry_num)
            sent["X-Slack-Retry-Reason"] = retry_reason
        for name, value in (headers or {}).items():
            sent.pop(name, None)
            if value is not None:
                sent[name] = value
        return sent
