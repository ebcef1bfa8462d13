"""A rubric in Slack: the confirmation of a new one, a parse error, the prompt naming the rubric a
request will be graded by, the hints on how to set one, and the channel-rubric editor (a modal).

Every rubric text shown back is escaped mrkdwn (see :mod:`bot.slack.mrkdwn`). Nothing here does I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from slack_sdk.models.blocks import Block, InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.rendering.results import FALLBACK_PREVIEW_MAX, short_number
from bot.slack.blocks import (
    MESSAGE_TEXT_BUDGET,
    PLAIN_TEXT_INPUT_MAX,
    block_dicts,
    code,
    context_block,
    plural,
    section_block,
    sections,
)
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import escape, truncate
from grading.rubric import MAX_RUBRIC_CHARS, Dimension, Rubric

ANCHOR_PREVIEW_MAX = 160
"""Longest anchor or description text quoted back when confirming a scored rubric."""

MODAL_CALLBACK_ID = "rubric_edit"
"""callback_id of the channel-rubric modal; its private_metadata is ``{"channel": id}``."""

MODAL_BLOCK_ID = "rubric"
"""block_id of the rubric input in the modal (``view.state.values[block][action]``)."""

MODAL_INPUT_ACTION_ID = "rubric_text"
"""action_id of the rubric input in the modal."""

AGGREGATION_WORDS: Mapping[str, str] = {
    "weighted": "weighted average; any score under its floor fails the answer",
    "min": "the weakest dimension decides",
    "per_dimension": "every dimension must reach the pass score",
}
"""How each aggregation rule reads in a rubric confirmation."""

RUBRIC_FORMAT_HINT = (
    "One criterion per line (each pass/fail), or YAML with `dimensions:` "
    "(name, weight, fail_below, anchors for 1/3/5) for scored rubrics."
)
"""How to write a rubric, in one sentence."""

REQUEST_PROMPT = "What should I do? Reply in this thread with your request."
"""What the bot asks when it is mentioned with nothing to do (the notification text)."""

CHANGE_RUBRIC_HINT = "_Start a message with `rubric:` to grade this thread against a different rubric._"
"""Tells a thread that already has a rubric how to use another."""

HOW_TO_SET_A_RUBRIC = (
    "Start a message with `rubric:` in this thread to set one, or set a channel default with `/rubric set`."
)
"""The two ways to give a thread a rubric, in one sentence."""

NO_RUBRIC_YET = f"_There's no rubric here yet, so answers are not graded. {HOW_TO_SET_A_RUBRIC}_"
"""Tells a thread without a rubric, before any answer, how to get one."""


def rubric_confirmation(rubric: Rubric) -> SlackMessage:
    """Confirms a new rubric by listing what was parsed, plus any lint warnings."""
    count, summary, items = _rubric_listing(rubric)
    warnings = [f"⚠️ {escape(w)}" for w in rubric.warnings]
    text = "\n".join([f"*Rubric set* — {summary}:", *items, *warnings])
    return {
        "text": f"Rubric set: {count}",
        "blocks": block_dicts(sections(truncate(text, MESSAGE_TEXT_BUDGET))),
    }


def rubric_forgotten(*, channel_default: bool) -> SlackMessage:
    """Tells a thread that the message which set its rubric was deleted, and what grades it now."""
    now = (
        "Answers here are graded against this channel's default rubric again."
        if channel_default
        else f"Answers here are not graded until a new rubric is set. {HOW_TO_SET_A_RUBRIC}"
    )
    text = f"🗑️ *The message that set this thread's rubric was deleted*, so I forgot that rubric. {now}"
    return {"text": "This thread's rubric was deleted", "blocks": block_dicts([section_block(text)])}


def request_prompt(rubric: Rubric | None, *, scope: str) -> SlackMessage:
    """Answers a mention with nothing to do: asks for the request, naming the rubric that will grade it.

    ``scope`` says whose rubric it is: ``thread`` (set with `rubric:`) or ``channel`` (the default).
    """
    ask = "*What should I do?* Reply in this thread with your request."
    if rubric is None:
        return {"text": REQUEST_PROMPT, "blocks": block_dicts([section_block(f"{ask}\n{NO_RUBRIC_YET}")])}
    count, summary, items = _rubric_listing(rubric)
    whose = "this thread's rubric" if scope == "thread" else "this channel's default rubric"
    listing = "\n".join([ask, f"I'll grade my answer against {whose} — {summary}:", *items])
    room = MESSAGE_TEXT_BUDGET - len(CHANGE_RUBRIC_HINT)
    return {
        "text": f"{REQUEST_PROMPT} Answers here are graded against {whose} ({count}).",
        "blocks": block_dicts([*sections(truncate(listing, room)), context_block(CHANGE_RUBRIC_HINT)]),
    }


def _rubric_listing(rubric: Rubric) -> tuple[str, str, list[str]]:
    """A rubric's size (``2 criteria``), its one-line summary and one bullet per criterion or dimension."""
    if rubric.is_scored:
        count = plural(len(rubric.dimensions), "scored dimension")
        aggregation = AGGREGATION_WORDS.get(rubric.aggregation, rubric.aggregation)
        summary = f"{count} (1–5), {aggregation}; passes at {short_number(rubric.pass_score)}/5"
        weights = rubric.weights()
        return count, summary, [_dimension_lines(d, weights.get(d.name)) for d in rubric.dimensions]
    count = plural(len(rubric.criteria), "criterion", "criteria")
    return count, f"{count}, each pass/fail", [f"• {escape(c.name)}" for c in rubric.criteria]


def _dimension_lines(dimension: Dimension, weight: float | None) -> str:
    facts = []
    if weight is not None:
        facts.append(f"weight {weight:.0%}")
    if dimension.fail_below is not None:
        facts.append(f"fails below {dimension.fail_below}")
    line = f"• *{escape(dimension.name)}*" + (f" ({', '.join(facts)})" if facts else "")
    if dimension.description:
        line += f" — {truncate(escape(dimension.description), ANCHOR_PREVIEW_MAX)}"
    anchors = [
        f"{score}: {truncate(escape(text), ANCHOR_PREVIEW_MAX)}"
        for score, text in sorted(dimension.anchors.items(), reverse=True)
    ]
    return line + ("\n      " + " · ".join(anchors) if anchors else "")


def rubric_error(error: str) -> SlackMessage:
    """Answers a rubric that did not parse; the thread keeps its previous rubric."""
    lead = "⚠️ That rubric didn't parse, so the previous rubric is still in place:"
    return {
        "text": f"That rubric didn't parse: {truncate(escape(error), FALLBACK_PREVIEW_MAX)}",
        "blocks": block_dicts([section_block(f"{lead}\n{code(error)}"), context_block(RUBRIC_FORMAT_HINT)]),
    }


def no_rubric_hint() -> str:
    """One line telling a thread without a rubric how to get one."""
    return f"_No rubric here, so this answer wasn't graded. {HOW_TO_SET_A_RUBRIC}_"


def rubric_modal(current: str | None, *, channel_id: str) -> dict[str, Any]:
    """The modal for editing a channel's default rubric, pre-filled with the current one.

    A current rubric longer than Slack lets an input hold is not pre-filled (it would be cut on
    saving); the modal says so instead.
    """
    limit = min(MAX_RUBRIC_CHARS, PLAIN_TEXT_INPUT_MAX)
    fits = current is not None and len(current) <= limit
    blocks: list[Block] = []
    if current is not None and not fits:
        blocks.append(
            section_block(
                f"The current rubric is {len(current):,} characters, more than this form holds "
                f"({limit:,}); replace it here, or use `/rubric set` for a longer one."
            )
        )
    blocks.append(
        InputBlock(
            block_id=MODAL_BLOCK_ID,
            label="Rubric",
            hint=RUBRIC_FORMAT_HINT.replace("`", ""),
            element=PlainTextInputElement(
                action_id=MODAL_INPUT_ACTION_ID,
                multiline=True,
                initial_value=current if fits else None,
                max_length=limit,
            ),
        )
    )
    view = View(
        type="modal",
        callback_id=MODAL_CALLBACK_ID,
        title="Channel rubric",
        submit="Save",
        close="Cancel",
        private_metadata=json.dumps({"channel": channel_id}),
        blocks=blocks,
    )
    return view.to_dict()
