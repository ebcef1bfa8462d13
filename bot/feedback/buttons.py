"""The 👍/👎 under a run's final answer (a ``context_actions`` block of ``feedback_buttons``), their
values, and what a click is answered (pure)."""

from __future__ import annotations

from slack_sdk.models.blocks import ContextActionsBlock, FeedbackButtonObject, FeedbackButtonsElement

from bot.slack.messages import BlockJson

FEEDBACK_ACTION_ID = "answer_feedback"
"""The action id of the feedback buttons, which `bot.listeners.actions` listens to."""

FEEDBACK_BLOCK_ID = "answer_feedback"
"""The block id of the buttons' ``context_actions`` block."""

GOOD, BAD = "good", "bad"
"""How a button's value begins: the 👍 or the 👎."""

THANKS = {
    True: "Thanks: your 👍 on this answer is recorded. Click 👎 instead to change it.",
    False: "Thanks: your 👎 on this answer is recorded. Click 👍 instead to change it.",
}
"""What the clicker alone is told once their vote is saved."""

UNREADABLE_FEEDBACK = "I can't read which answer that button is for, so your vote was not recorded."
"""Told to someone whose click carries a value no feedback button of the bot's would have."""

UNKNOWN_RUN = "That answer is no longer on record (its thread was purged), so your vote was not recorded."
"""Told to someone who votes on an answer whose run is gone (or was never this workspace's)."""


def feedback_block(run_id: int) -> BlockJson:
    """The 👍/👎 of run `run_id`'s final answer."""
    buttons = FeedbackButtonsElement(
        action_id=FEEDBACK_ACTION_ID,
        positive_button=FeedbackButtonObject(
            text="👍", accessibility_label="This answer helped", value=f"{GOOD}:{run_id}"
        ),
        negative_button=FeedbackButtonObject(
            text="👎", accessibility_label="This answer did not help", value=f"{BAD}:{run_id}"
        ),
    )
    return ContextActionsBlock(elements=[buttons], block_id=FEEDBACK_BLOCK_ID).to_dict()


def parse_feedback(value: str) -> tuple[int, bool]:
    """The run and whether it is a 👍, from a feedback button's value; ValueError if it is none of ours."""
    side, _, run = value.partition(":")
    if side not in (GOOD, BAD) or not run.isdigit() or len(run) > len(str(2**63)):
        raise ValueError(f"not a feedback button's value: {value[:40]!r}")
    return int(run), side == GOOD
