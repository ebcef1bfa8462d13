"""The messages the bot's renderers build, typed: ready to splat into ``chat.postMessage``,
``chat.update`` or a command's ``respond``.

Blocks and metadata stay JSON (what Slack takes): the blocks are built with slack_sdk's Block Kit
models, which check Slack's limits as they serialise (see :mod:`bot.slack.blocks`); the metadata is
a plain dict because slack_sdk's Web API methods take it as one.
"""

from __future__ import annotations

from typing import Any, Final, NotRequired, TypedDict

BlockJson = dict[str, Any]
"""One serialised Block Kit block, as Slack takes it."""


class SlackMessage(TypedDict):
    """One message of the bot's: the notification text, and the blocks and metadata where it has them."""

    text: str
    """What notifications and screen readers show (the blocks are what the thread shows)."""
    blocks: NotRequired[list[BlockJson]]
    metadata: NotRequired[dict[str, Any]]
    """Slack's message metadata: ``{"event_type": …, "event_payload": {…}}`` (no nulls in it)."""


class Unfurls(TypedDict):
    """Whether Slack previews the links and media of a posted message (``chat.postMessage``)."""

    unfurl_links: bool
    unfurl_media: bool


NO_UNFURLS: Final[Unfurls] = {"unfurl_links": False, "unfurl_media": False}
"""Every message the bot posts is sent with this: to preview a link Slack fetches it, so a URL a
model or a person put into an answer would be fetched with nobody clicking it."""
