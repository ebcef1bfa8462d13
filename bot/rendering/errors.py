"""A failure told in a thread (a model or the grader failed; the thread keeps its rubric and history),
and the ``/rubric help`` text.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.rendering.rubrics import RUBRIC_FORMAT_HINT
from bot.slack.blocks import (
    block_dicts,
    code,
    context_block,
    section_block,
)
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import SECTION_TEXT_MAX, escape, truncate


def error_message(summary: str, detail: str | None) -> SlackMessage:
    """A model or grader failure in a thread, e.g. summary ``The grader failed: timed out``."""
    text = f"⚠️ *{escape(summary)}*"
    if detail:
        text += f"\n{code(detail)}"
    return {
        "text": summary,
        "blocks": block_dicts(
            [
                section_block(truncate(text, SECTION_TEXT_MAX)),
                context_block("The thread's rubric and history are kept; reply here to try again."),
            ]
        ),
    }


def help_text(subcommands: Sequence[tuple[str, str]]) -> str:
    """The ``/rubric help`` text, listing each subcommand's (usage, what it does) in order."""
    lines = ["*`/rubric` — how this channel's answers are graded*"]
    lines += [f"• `{usage}` — {what}" for usage, what in subcommands]
    lines += [
        "In a thread, start a message with `rubric:` to set or replace that thread's rubric.",
        RUBRIC_FORMAT_HINT,
    ]
    return "\n".join(lines)
