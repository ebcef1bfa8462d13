"""What the assistant pane says when it opens, and the prompts it suggests.

Two suggested prompts are requests for the loop (an example request, graded by the channel's
rubric); the others are questions about the rubric and the grader, which the bot answers itself
(`PaneQuestion`). A person may also type them: the exact text (case and outer spaces aside) counts.
"""

from __future__ import annotations

from enum import Enum
from typing import TypedDict

from bot.slack.messages import SlackMessage

THREAD_CONTEXT_EVENT = "assistant_thread_context"
"""The greeting's metadata ``event_type``: the pane's thread context, as Bolt's store keeps it."""

EXAMPLE_REQUEST = "Write a three-sentence summary of why code review matters."
"""The suggested example request: short, so the person sees a whole graded run quickly."""


class PaneQuestion(Enum):
    """A suggested prompt the bot answers itself; its value is the prompt's text."""

    RUBRIC = "Show this channel's rubric"
    AGREEMENT = "How far does the grader agree with us?"
    SET_RUBRIC = "Set a rubric for this conversation"


class SuggestedPrompt(TypedDict):
    """One suggested prompt as ``assistant.threads.setSuggestedPrompts`` takes it."""

    title: str
    """What the button shows."""
    message: str
    """What the person sends by clicking it."""


PROMPTS_TITLE = "Try one of these"
"""The heading Slack shows above the suggested prompts."""

SUGGESTED_PROMPTS: list[SuggestedPrompt] = [
    SuggestedPrompt(title="Try a graded request", message=EXAMPLE_REQUEST),
    *(SuggestedPrompt(title=question.value, message=question.value) for question in PaneQuestion),
]
"""The prompts offered when the pane opens: the example request, then the questions."""

SET_RUBRIC_HELP = (
    "Send a message starting with `rubric:` followed by your criteria, one per line, e.g.\n"
    "```rubric:\n- Cites a source\n- Under 200 words```\n"
    "Every request in this conversation is then graded against it instead of the channel's."
)
"""The answer to "Set a rubric for this conversation"."""


def pane_question(text: str) -> PaneQuestion | None:
    """The question `text` asks, if it is one of the suggested questions."""
    wanted = text.strip().casefold()
    return next((q for q in PaneQuestion if q.value.casefold() == wanted), None)


def greeting(channel: str | None, context: dict[str, str]) -> SlackMessage:
    """The pane's one greeting, carrying its thread `context` (Bolt's store reads it from there)."""
    beside = f"<#{channel}>" if channel else "the channel you open me beside"
    text = (
        "Hi! Ask me for anything here. I answer, then grade my answer against the rubric of "
        f"{beside} and revise until it passes (or I run out of tries); each try's results come with "
        "Agree / Disagree buttons so your team can check the grader. Start a message with `rubric:` "
        "to use a rubric of your own in this conversation."
    )
    return {"text": text, "metadata": {"event_type": THREAD_CONTEXT_EVENT, "event_payload": context}}
