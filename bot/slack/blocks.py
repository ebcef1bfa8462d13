"""Slack's Block Kit limits and the generic builders every surface renders with.

Each surface has its own renderer: thread messages and the rubric editor (:mod:`bot.rendering`),
the review tally, buttons and form (:mod:`bot.review.controls`, :mod:`bot.review.form`), the agreement
report and the replay comparison (:mod:`bot.agreement.report`, :mod:`bot.agreement.comparison`) and
the Home tab (:mod:`bot.home`);
this module holds only what they share: the limits Slack enforces and small builders that keep
within them. Blocks are slack_sdk's Block Kit models, whose ``to_dict()`` also validates Slack's
per-field limits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from slack_sdk.models.blocks import (
    Block,
    ContextBlock,
    HeaderBlock,
    MarkdownBlock,
    MarkdownTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.slack.messages import BlockJson
from bot.slack.mrkdwn import ELLIPSIS, FENCE, SECTION_TEXT_MAX, code_body, split_mrkdwn, truncate

__all__ = [
    "BUTTON_VALUE_MAX",
    "CONTEXT_TEXT_MAX",
    "HEADER_TEXT_MAX",
    "MARKDOWN_MESSAGE_BUDGET",
    "MARKDOWN_TEXT_MAX",
    "MAX_BLOCKS",
    "MAX_VIEW_BLOCKS",
    "MESSAGE_TEXT_BUDGET",
    "PLAIN_TEXT_INPUT_MAX",
    "SECTION_TEXT_MAX",
    "block_dicts",
    "code",
    "context_block",
    "header_block",
    "markdown_block",
    "plural",
    "section_block",
    "sections",
    "text_length",
]

# --- Slack's limits (Block Kit reference, docs.slack.dev) -----------------------------------

MAX_BLOCKS = 50
"""Most blocks Slack accepts in one message."""

MAX_VIEW_BLOCKS = View.blocks_max_length
"""Most blocks Slack accepts in a modal or a Home tab (100)."""

HEADER_TEXT_MAX = 150
"""Longest text a header block takes."""

CONTEXT_TEXT_MAX = 3000
"""Longest text object in a context block (the general text-object limit; context blocks
have no lower one of their own, only a cap of 10 elements)."""

MARKDOWN_TEXT_MAX = MarkdownBlock.text_max_length
"""Longest standard-Markdown text one ``markdown`` block takes (12,000)."""

BUTTON_VALUE_MAX = 2000
"""Longest value a button may carry back in its block_actions payload."""

PLAIN_TEXT_INPUT_MAX = 3000
"""Slack caps a plain_text_input's max_length at 3,000, below grading's MAX_RUBRIC_CHARS."""

MESSAGE_TEXT_BUDGET = 10_000
"""Most text (summed over all blocks) put in one message of the bot's own mrkdwn. Slack rejects
messages whose blocks hold roughly 12,000–13,000 characters with ``msg_blocks_too_long``, a
limit it does not document exactly; staying at 10,000 leaves room for the block containers."""

MARKDOWN_MESSAGE_BUDGET = MARKDOWN_TEXT_MAX
"""Most text (summed over all blocks) put in one message that carries model Markdown. Slack
refuses messages whose blocks total over about 13,000 characters with ``msg_blocks_too_long``;
one full markdown block is what fits below that, so longer Markdown goes on in another message."""

DETAIL_MAX = 2000
"""Longest text (parse errors, exception text) shown verbatim in a code block."""


def header_block(text: str) -> HeaderBlock:
    """A header, shortened to Slack's limit."""
    if len(text) > HEADER_TEXT_MAX:
        text = text[: HEADER_TEXT_MAX - len(ELLIPSIS)] + ELLIPSIS
    return HeaderBlock(text=text)


def section_block(text: str) -> SectionBlock:
    """A mrkdwn section (the caller keeps ``text`` within SECTION_TEXT_MAX)."""
    return SectionBlock(text=MarkdownTextObject(text=text))


def sections(text: str) -> list[Block]:
    """mrkdwn of any length as as many sections as Slack needs, split on paragraph and line breaks."""
    return [section_block(piece) for piece in split_mrkdwn(text)]


def markdown_block(markdown: str) -> MarkdownBlock:
    """Standard Markdown for Slack to render (the caller keeps it within MARKDOWN_TEXT_MAX)."""
    return MarkdownBlock(text=markdown)


def context_block(text: str) -> ContextBlock:
    """A one-line mrkdwn context, shortened to Slack's limit."""
    return ContextBlock(elements=[MarkdownTextObject(text=truncate(text, CONTEXT_TEXT_MAX))])


def code(text: str) -> str:
    """Text shown verbatim in a mrkdwn code block, up to DETAIL_MAX characters (see `code_body`)."""
    return f"{FENCE}{truncate(code_body(text), DETAIL_MAX)}{FENCE}"


def block_dicts(blocks: Iterable[Block]) -> list[BlockJson]:
    """Serialise blocks; slack_sdk validates each against Slack's field limits on the way."""
    return [block.to_dict() for block in blocks]


def text_length(node: object) -> int:
    """Characters of text in serialised blocks (any JSON), as counted against MESSAGE_TEXT_BUDGET."""
    if isinstance(node, Mapping):
        return sum(len(v) if k == "text" and isinstance(v, str) else text_length(v) for k, v in node.items())
    if isinstance(node, list):
        return sum(text_length(item) for item in node)
    return 0


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``1 review``, ``2 reviews``; ``many`` for irregular plurals (``criteria``)."""
    return f"{count} {singular if count == 1 else many or singular + 's'}"
