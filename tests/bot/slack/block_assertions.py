"""Assertions on rendered Block Kit messages, shared by the rendering tests."""

from slack_sdk.models.blocks import Block

from bot.slack.blocks import MAX_BLOCKS, MESSAGE_TEXT_BUDGET
from tests.standins.slack_api import block_texts


def texts(message):
    """Every text string in a message's blocks, in order."""
    return list(block_texts(message["blocks"]))


def all_text(message):
    return "\n".join(texts(message))


def assert_within_slack_limits(message, budget=MESSAGE_TEXT_BUDGET):
    blocks = message["blocks"]
    assert 0 < len(blocks) <= MAX_BLOCKS
    assert sum(len(t) for t in texts(message)) <= budget
    for block in blocks:
        # Parsing back through slack_sdk's models and serialising re-runs its limit checks.
        assert Block.parse(block).to_dict() == block
        if block["type"] == "section":
            assert len(block["text"]["text"]) <= 3000
        if block["type"] == "markdown":
            assert 0 < len(block["text"]) <= 12_000
        if block["type"] == "header":
            assert len(block["text"]["text"]) <= 150
