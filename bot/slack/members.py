"""Who is in which channel, and who the bot is, as Slack says: the Home tab lists the channels a
person shares with the bot, and the assistant pane follows only a channel its person is in.
"""

from __future__ import annotations

from cachetools import TTLCache
from slack_sdk.web.async_client import AsyncWebClient

CHANNEL_TYPES = "public_channel,private_channel"
"""Conversations that count as channels here: where rubrics and reviews live (not DMs)."""

MEMBERSHIP_PAGE = 200
"""Channels asked for per ``users.conversations`` page."""

BOT_IDENTITY_CACHE = 64
"""Bot tokens whose bot user a process remembers (one per workspace it served lately)."""

BOT_IDENTITY_SECONDS = 3600.0
"""How long a bot token's user id is trusted: it never changes while the token lives."""

_bot_users: TTLCache[str, str] = TTLCache(BOT_IDENTITY_CACHE, BOT_IDENTITY_SECONDS)


async def channels_of(client: AsyncWebClient, user: str | None) -> list[str]:
    """Channel ids ``user`` (the bot itself when None) is a member of, over every page, in the
    order Slack lists them."""
    ids: list[str] = []
    pages = await client.users_conversations(
        user=user, types=CHANNEL_TYPES, exclude_archived=True, limit=MEMBERSHIP_PAGE
    )
    async for page in pages:
        ids += [channel["id"] for channel in page.get("channels") or []]
    return ids


async def is_member(client: AsyncWebClient, user: str, channel: str) -> bool:
    """Whether ``user`` is a member of ``channel``."""
    return channel in await channels_of(client, user)


async def bot_user_id(client: AsyncWebClient) -> str:
    """The user id of the bot whose token `client` carries (``auth.test``, remembered per token)."""
    token = client.token or ""
    if token not in _bot_users:
        _bot_users[token] = str((await client.auth_test()).get("user_id") or "")
    return _bot_users[token]
