"""The review form (Disagree…, or Review… when blind): one menu and one comment per criterion, and
reading a submission back.

Pre-set, each menu starts at the grader's verdict; blind (`bot.review.modes`), it starts empty and
the grader's verdicts are not shown, so the reviewer's own judgement is what is saved.

The modal's inputs are keyed by the criterion's position among the evaluation's reviewable
criteria, not by its name: names may be longer than a block_id allows. Reading a submission
back therefore takes the same evaluation, which is also where the grader's verdicts come from,
so a stored review row always pairs the reviewer's verdict with what the grader really said.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import ConfigDict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass
from slack_sdk.models.blocks import (
    Block,
    InputBlock,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.models.views import View

from bot.db.reviews import ReviewRow, ReviewVerdict
from bot.review.verdicts import SCORES, VERDICT_WORDS, grader_verdicts, verdict_choices
from bot.slack.blocks import MAX_VIEW_BLOCKS, SECTION_TEXT_MAX, section_block
from bot.slack.mrkdwn import escape, truncate
from bot.slack.payloads import Iteration, SubmittedView, Text, problems
from grading import RubricEvaluation

REVIEW_CALLBACK_ID = "review_submit"
"""callback_id of the review modal; its private_metadata is a :class:`ReviewContext` as JSON."""

COMMENT_MAX = 1000
"""Longest comment a reviewer may give per criterion. Comments reach the grader's prompt as
calibration examples, so they are kept to a few sentences."""

MODAL_TITLE = "Review the grader"
"""Title of the review modal and of the notice that replaces it when a review cannot be saved."""

LABEL_MAX = InputBlock.label_max_length
"""Longest input label (and hint) Slack accepts: a criterion's name is shortened to it."""

ERROR_NAME_MAX = 100
"""Longest criterion name quoted in an error shown under a form input (its label names it too)."""

_VERDICT_BLOCK, _COMMENT_BLOCK = "verdict-{}", "comment-{}"
"""block_id patterns of one criterion's inputs, filled with its position."""

_VERDICT_ACTION, _COMMENT_ACTION = "verdict", "comment"
"""action_ids of the inputs inside their blocks."""


class ReviewInputError(ValueError):
    """A submitted review form has an unusable answer; ``block_id`` is the input at fault."""

    def __init__(self, message: str, block_id: str) -> None:
        super().__init__(message)
        self.block_id = block_id


@dataclass(frozen=True, config=ConfigDict(strict=True, extra="forbid"))
class ReviewContext:
    """Which iteration a review modal is about and where its evaluation message is."""

    grading_run_id: Text
    iteration: Iteration
    channel: Text
    message_ts: Text
    thread_ts: Text
    blind: bool = False
    """The form opened blind: nothing pre-set, the grader's verdicts hidden."""


_CONTEXT = TypeAdapter(ReviewContext)
"""Reads and writes a ReviewContext as the modal's private_metadata."""


def review_modal(
    evaluation: RubricEvaluation,
    *,
    channel: str,
    message_ts: str,
    thread_ts: str,
    previous: Sequence[ReviewRow] | None = None,
    blind: bool = False,
    second: bool = False,
) -> dict[str, Any]:
    """The review modal: one menu per criterion plus an optional comment each.

    Each menu starts at the grader's verdict (``blind``: empty, and the grader's verdicts and
    reasons are not shown), or at this reviewer's ``previous`` verdict when they reviewed the
    iteration before (their earlier comments are kept too). ``second``: they are asked as the
    iteration's second reviewer. Raises ValueError when the evaluation has nothing to review or more
    criteria than one modal can hold.
    """
    verdicts = grader_verdicts(evaluation)
    if not verdicts:
        raise ValueError("this evaluation has no graded criteria to review")
    if 1 + 2 * len(verdicts) > MAX_VIEW_BLOCKS:
        raise ValueError(f"{len(verdicts)} criteria are more than one review form can hold")
    earlier = {row.criterion: row for row in previous or ()}
    gaps = {c["name"]: c["gap"].strip() for c in evaluation["criteria"]}
    context = ReviewContext(
        grading_run_id=evaluation["grading_run_id"],
        iteration=evaluation["iteration"],
        channel=channel,
        message_ts=message_ts,
        thread_ts=thread_ts,
        blind=blind,
    )
    choices = verdict_choices(evaluation)
    blocks: list[Block] = [_intro(evaluation, revisiting=bool(earlier), blind=blind, second=second)]
    for index, (name, grader) in enumerate(verdicts.items()):
        shown = None if blind else (grader, gaps.get(name, ""))
        blocks += _criterion_inputs(index, name, shown, choices, earlier.get(name))
    view = View(
        type="modal",
        callback_id=REVIEW_CALLBACK_ID,
        title=MODAL_TITLE,
        submit="Save review",
        close="Cancel",
        private_metadata=_CONTEXT.dump_json(context).decode(),
        blocks=blocks,
    )
    return view.to_dict()


def review_notice(text: str) -> dict[str, Any]:
    """A modal that only says ``text``: shown in place of a review form that cannot be saved."""
    view = View(
        type="modal",
        title=MODAL_TITLE,
        close="Close",
        blocks=[section_block(truncate(escape(text), SECTION_TEXT_MAX))],
    )
    return view.to_dict()


def _intro(evaluation: RubricEvaluation, *, revisiting: bool, blind: bool, second: bool) -> SectionBlock:
    position = f"{evaluation['iteration'] + 1}/{evaluation['max_iterations']}"
    if blind:
        asked = "A second review is wanted on this iteration. " if second else ""
        start = "your earlier review" if revisiting else "nothing"
        return section_block(
            f"*Iteration {position}* — {asked}Judge each criterion yourself: the menus start at {start} and "
            "the grader's verdicts stay hidden until you save. A comment saying why helps the grader "
            "learn the team's judgement."
        )
    preset = "your earlier review" if revisiting else "the grader's verdicts"
    text = (
        f"*Iteration {position}* — the menus start at {preset}. Change the ones you disagree "
        "with; a comment saying why helps the grader learn the team's judgement."
    )
    return section_block(text)


def _criterion_inputs(
    index: int,
    name: str,
    grader: tuple[str, str] | None,
    choices: Sequence[str],
    before: ReviewRow | None,
) -> list[Block]:
    """One criterion's menu and comment; ``grader``: its verdict and reason as the hint and the menu's
    start (None: blind, neither shown)."""
    options = {value: Option(value=value, label=VERDICT_WORDS.get(value, value)) for value in choices}
    initial: str | None = before.reviewer_verdict if before and before.reviewer_verdict in options else None
    hint = None
    if grader is not None:
        verdict, gap = grader
        initial = initial or verdict
        said = f"{verdict}/5" if verdict in SCORES else VERDICT_WORDS[verdict]
        hint = PlainTextObject(text=truncate(f"Grader: {said}" + (f" — {gap}" if gap else ""), LABEL_MAX))
    return [
        InputBlock(
            block_id=_VERDICT_BLOCK.format(index),
            label=PlainTextObject(text=truncate(name, LABEL_MAX)),
            hint=hint,
            element=StaticSelectElement(
                action_id=_VERDICT_ACTION,
                options=list(options.values()),
                # A criterion the grader could not tell (or any, blind) starts unset: the reviewer chooses.
                initial_option=options.get(initial) if initial else None,
            ),
        ),
        InputBlock(
            block_id=_COMMENT_BLOCK.format(index),
            label="Why? (optional)",
            optional=True,
            element=PlainTextInputElement(
                action_id=_COMMENT_ACTION,
                multiline=True,
                max_length=COMMENT_MAX,
                initial_value=before.comment if before and before.comment else None,
            ),
        ),
    ]


# --- Reading a submission back ------------------------------------------------------------------


def review_context(view: SubmittedView) -> ReviewContext:
    """Which iteration a submitted review modal is about; ValueError if the view is not one."""
    if view.callback_id != REVIEW_CALLBACK_ID:
        raise ValueError(f"not a review form (callback_id {view.callback_id!r})")
    try:
        return _CONTEXT.validate_json(view.private_metadata)
    except ValidationError as exc:
        raise ValueError(f"the review form's metadata is invalid: {problems(exc)}") from None


def parse_review_submission(
    view: SubmittedView, evaluation: RubricEvaluation
) -> tuple[ReviewContext, list[ReviewVerdict]]:
    """The reviewer's verdicts from a submitted review modal of ``evaluation``.

    ``evaluation`` is the stored evaluation the modal was built from (look it up with
    :func:`review_context`'s run id and iteration): it supplies the criterion names and the
    grader's verdicts. Raises ValueError when the view is not a review of that evaluation or
    an answer is missing or not one of the offered verdicts (then a :class:`ReviewInputError`
    naming the input's block).
    """
    context = review_context(view)
    about = (evaluation["grading_run_id"], evaluation["iteration"])
    if about != (context.grading_run_id, context.iteration):
        raise ValueError("the review form is about a different iteration than the evaluation given")
    allowed = verdict_choices(evaluation)
    verdicts = []
    for index, (name, grader) in enumerate(grader_verdicts(evaluation).items()):
        block_id = _VERDICT_BLOCK.format(index)
        chosen = view.input(block_id, _VERDICT_ACTION).selected_option
        answer = chosen.value if chosen else None
        reviewer = next((verdict for verdict in allowed if verdict == answer), None)
        if reviewer is None:
            shown = truncate(name, ERROR_NAME_MAX)
            raise ReviewInputError(f"Choose one of the offered verdicts for “{shown}”.", block_id)
        comment = view.input(_COMMENT_BLOCK.format(index), _COMMENT_ACTION)
        verdicts.append(ReviewVerdict(name, grader, reviewer, (comment.value or "").strip()[:COMMENT_MAX]))
    return context, verdicts
