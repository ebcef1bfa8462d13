"""Team review of one grader iteration: verdict strings, the review modal, reading it back, and
the team's disagreements as worked examples for the grader (calibration).

A reviewer's verdict on a criterion is stored as a string: ``"pass"``/``"fail"`` for a list
rubric's criteria, ``"1"``..``"5"`` for a scored rubric's dimensions (see
:class:`bot.store.ReviewVerdict`). The modal code is pure: the listeners fetch the evaluation,
open the modal built here and store what :func:`parse_review_submission` returns. The grader's
calibration source (:func:`calibration_source`) reads the channel's reviews back from the store.

The modal's inputs are keyed by the criterion's position among the evaluation's reviewable
criteria, not by its name: names may be longer than a block_id allows. Reading a submission
back therefore takes the same evaluation, which is also where the grader's verdicts come from,
so a stored review row always pairs the reviewer's verdict with what the grader really said.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langgraph.runtime import Runtime
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

from bot.agent import ThreadContext
from bot.blocks import MAX_VIEW_BLOCKS, SECTION_TEXT_MAX, section_block
from bot.mrkdwn import escape, truncate
from bot.payloads import Iteration, SubmittedView, Text, problems
from bot.store import ReviewRow, ReviewVerdict, Store
from grading import CalibrationExample, Rubric

__all__ = [
    "CALIBRATION_EXAMPLES",
    "COMMENT_MAX",
    "REVIEW_CALLBACK_ID",
    "ReviewContext",
    "ReviewInputError",
    "agree_verdicts",
    "calibration_examples",
    "calibration_source",
    "grader_verdicts",
    "parse_review_submission",
    "review_context",
    "review_modal",
    "review_notice",
    "verdict_label",
]

REVIEW_CALLBACK_ID = "review_submit"
"""callback_id of the review modal; its private_metadata is a :class:`ReviewContext` as JSON."""

PASS, FAIL = "pass", "fail"
"""Verdict strings of a list rubric's criteria."""

SCORES = tuple(str(score) for score in range(1, 6))
"""Verdict strings of a scored rubric's dimensions, worst first."""

VERDICT_WORDS: Mapping[str, str] = {PASS: "✅ Pass", FAIL: "❌ Fail", "1": "1 (worst)", "5": "5 (best)"}
"""How a verdict reads in the modal's menus; scores 2–4 read as themselves."""

COMMENT_MAX = 1000
"""Longest comment a reviewer may give per criterion. Comments reach the grader's prompt as
calibration examples, so they are kept to a few sentences."""

CALIBRATION_EXAMPLES = 5
"""Most team disagreements shown to the grader as worked examples, newest first. A few recent
cases steer the grader; many would crowd its prompt and weigh old judgements as much as new."""

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


_CONTEXT = TypeAdapter(ReviewContext)
"""Reads and writes a ReviewContext as the modal's private_metadata."""


def grader_verdicts(evaluation: Mapping[str, Any]) -> dict[str, str]:
    """The grader's verdict per criterion name, in the evaluation's order.

    A scored dimension's verdict is its score; a criterion the grader gave no score is left
    out (nothing to agree or disagree with). A name repeated in a list rubric counts once: the
    grader's verdicts on the copies cannot be told apart.
    """
    scored = evaluation.get("kind") == "scored"
    verdicts: dict[str, str] = {}
    for criterion in evaluation.get("criteria") or []:
        name = str(criterion.get("name", ""))
        if scored:
            score = criterion.get("score")
            verdict = str(score) if score is not None else None
        else:
            verdict = PASS if criterion.get("passed") else FAIL
        if name and verdict is not None:
            verdicts.setdefault(name, verdict)
    return verdicts


def agree_verdicts(evaluation: Mapping[str, Any]) -> list[ReviewVerdict]:
    """The review recorded by Agree: the reviewer accepts every verdict of the iteration."""
    return [ReviewVerdict(name, verdict, verdict) for name, verdict in grader_verdicts(evaluation).items()]


def verdict_label(verdict: str) -> bool | int:
    """A stored verdict string as the label agreement is computed on: pass → True, "3" → 3."""
    if verdict in (PASS, FAIL):
        return verdict == PASS
    if verdict in SCORES:
        return int(verdict)
    raise ValueError(f"{verdict!r} is not a verdict; expected pass, fail or 1–5")


def calibration_examples(rows: Sequence[ReviewRow]) -> list[CalibrationExample]:
    """The team's disagreements as the grader's worked examples; scores read as ``2/5``."""
    return [
        CalibrationExample(
            criterion=row.criterion,
            grader_verdict=_verdict_words(row.grader_verdict),
            team_verdict=_verdict_words(row.reviewer_verdict),
            comment=row.comment,
        )
        for row in rows
    ]


def _verdict_words(verdict: str) -> str:
    return f"{verdict}/5" if verdict in SCORES else verdict


def calibration_source(
    store: Store,
) -> Callable[[Rubric, Runtime[ThreadContext]], Awaitable[list[CalibrationExample]]]:
    """The grader's calibration source: the run's channel's latest disagreements with this rubric.

    No examples when calibration is switched off in the channel, or when a run has no `ThreadContext`
    (the terminal's `grade`, say).
    """

    async def examples(rubric: Rubric, runtime: Runtime[ThreadContext]) -> list[CalibrationExample]:
        where = runtime.context
        if where is None or not await store.calibration_enabled(where.team, where.channel):
            return []
        rows = await store.recent_disagreements(
            where.team, where.channel, rubric.text, limit=CALIBRATION_EXAMPLES
        )
        return calibration_examples(rows)

    return examples


# --- The modal --------------------------------------------------------------------------------


def review_modal(
    evaluation: Mapping[str, Any],
    *,
    channel: str,
    message_ts: str,
    thread_ts: str,
    previous: Sequence[ReviewRow] | None = None,
) -> dict:
    """The Disagree… modal: one menu per criterion, pre-set, plus an optional comment each.

    Each menu starts at the grader's verdict, or at this reviewer's ``previous`` verdict when
    they reviewed the iteration before (their earlier comments are kept too). Raises ValueError
    when the evaluation has nothing to review or more criteria than one modal can hold.
    """
    verdicts = grader_verdicts(evaluation)
    if not verdicts:
        raise ValueError("this evaluation has no graded criteria to review")
    if 1 + 2 * len(verdicts) > MAX_VIEW_BLOCKS:
        raise ValueError(f"{len(verdicts)} criteria are more than one review form can hold")
    earlier = {row.criterion: row for row in previous or ()}
    gaps = {str(c.get("name", "")): (c.get("gap") or "").strip() for c in evaluation.get("criteria") or []}
    context = ReviewContext(
        grading_run_id=str(evaluation["grading_run_id"]),
        iteration=int(evaluation["iteration"]),
        channel=channel,
        message_ts=message_ts,
        thread_ts=thread_ts,
    )
    choices = SCORES[::-1] if evaluation.get("kind") == "scored" else (PASS, FAIL)
    blocks: list[Block] = [_intro(evaluation, revisiting=bool(earlier))]
    for index, (name, grader) in enumerate(verdicts.items()):
        before = earlier.get(name)
        blocks += _criterion_inputs(index, name, grader, gaps.get(name, ""), choices, before)
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


def review_notice(text: str) -> dict:
    """A modal that only says ``text``: shown in place of a review form that cannot be saved."""
    view = View(
        type="modal",
        title=MODAL_TITLE,
        close="Close",
        blocks=[section_block(truncate(escape(text), SECTION_TEXT_MAX))],
    )
    return view.to_dict()


def _intro(evaluation: Mapping[str, Any], *, revisiting: bool) -> SectionBlock:
    position = f"{int(evaluation['iteration']) + 1}/{evaluation.get('max_iterations', '?')}"
    preset = "your earlier review" if revisiting else "the grader's verdicts"
    text = (
        f"*Iteration {position}* — the menus start at {preset}. Change the ones you disagree "
        "with; a comment saying why helps the grader learn the team's judgement."
    )
    return section_block(text)


def _criterion_inputs(
    index: int,
    name: str,
    grader: str,
    gap: str,
    choices: Sequence[str],
    before: ReviewRow | None,
) -> list[Block]:
    options = {value: Option(value=value, label=VERDICT_WORDS.get(value, value)) for value in choices}
    initial = before.reviewer_verdict if before and before.reviewer_verdict in options else grader
    said = f"{grader}/5" if grader in SCORES else VERDICT_WORDS[grader]
    hint = f"Grader: {said}" + (f" — {gap}" if gap else "")
    return [
        InputBlock(
            block_id=_VERDICT_BLOCK.format(index),
            label=PlainTextObject(text=truncate(name, LABEL_MAX)),
            hint=PlainTextObject(text=truncate(hint, LABEL_MAX)),
            element=StaticSelectElement(
                action_id=_VERDICT_ACTION,
                options=list(options.values()),
                initial_option=options[initial],
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
    view: SubmittedView, evaluation: Mapping[str, Any]
) -> tuple[ReviewContext, list[ReviewVerdict]]:
    """The reviewer's verdicts from a submitted review modal of ``evaluation``.

    ``evaluation`` is the stored evaluation the modal was built from (look it up with
    :func:`review_context`'s run id and iteration): it supplies the criterion names and the
    grader's verdicts. Raises ValueError when the view is not a review of that evaluation or
    an answer is missing or not one of the offered verdicts (then a :class:`ReviewInputError`
    naming the input's block).
    """
    context = review_context(view)
    about = (str(evaluation.get("grading_run_id")), evaluation.get("iteration"))
    if about != (context.grading_run_id, context.iteration):
        raise ValueError("the review form is about a different iteration than the evaluation given")
    allowed = set(SCORES) if evaluation.get("kind") == "scored" else {PASS, FAIL}
    verdicts = []
    for index, (name, grader) in enumerate(grader_verdicts(evaluation).items()):
        block_id = _VERDICT_BLOCK.format(index)
        chosen = view.input(block_id, _VERDICT_ACTION)
        reviewer = chosen.selected_option.value if chosen.selected_option else None
        if reviewer not in allowed:
            shown = truncate(name, ERROR_NAME_MAX)
            raise ReviewInputError(f"Choose one of the offered verdicts for “{shown}”.", block_id)
        comment = view.input(_COMMENT_BLOCK.format(index), _COMMENT_ACTION)
        verdicts.append(ReviewVerdict(name, grader, reviewer, (comment.value or "").strip()[:COMMENT_MAX]))
    return context, verdicts
