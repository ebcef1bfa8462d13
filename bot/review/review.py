"""Team review of the grader, the whole feature: what a verdict means, the Agree / Disagree…
buttons and their value, the tally, the review form and reading it back, saving a review and
refreshing its message, and the team's disagreements as worked examples for the grader
(calibration). The listeners call in here; :mod:`bot.threads.render` receives the review's blocks ready.

A reviewer's verdict on a criterion is stored as a string: ``"pass"``/``"fail"`` for a list
rubric's criteria, ``"1"``..``"5"`` for a scored rubric's dimensions (see
:class:`bot.db.store.ReviewVerdict`). Saving a review and refreshing its message's tally happen under
the store's lock of the iteration, so whichever refresh runs last has read every review saved
before it: concurrent reviewers never leave a stale tally behind.

The modal's inputs are keyed by the criterion's position among the evaluation's reviewable
criteria, not by its name: names may be longer than a block_id allows. Reading a submission
back therefore takes the same evaluation, which is also where the grader's verdicts come from,
so a stored review row always pairs the reviewer's verdict with what the grader really said.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence

from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass
from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    InputBlock,
    Option,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
    StaticSelectElement,
)
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent import ThreadContext
from bot.db.store import EvaluationRecord, ReviewRow, ReviewVerdict, Store
from bot.slack.blocks import (
    BUTTON_VALUE_MAX,
    MAX_VIEW_BLOCKS,
    SECTION_TEXT_MAX,
    context_block,
    plural,
    section_block,
)
from bot.slack.client import attempt
from bot.slack.mrkdwn import escape, truncate
from bot.slack.payloads import Iteration, SubmittedView, Text, problems
from bot.threads import render
from grading import CalibrationExample, Rubric, RubricEvaluation

__all__ = [
    "AGREE_ACTION_ID",
    "CALIBRATION_EXAMPLES",
    "COMMENT_MAX",
    "DISAGREE_ACTION_ID",
    "REVIEW_CALLBACK_ID",
    "UNKNOWN_EVALUATION",
    "ReviewContext",
    "ReviewInputError",
    "ReviewTally",
    "agree_verdicts",
    "calibration_examples",
    "calibration_source",
    "grader_verdicts",
    "parse_review_submission",
    "parse_review_value",
    "refresh_tally",
    "review_context",
    "review_controls",
    "review_modal",
    "review_notice",
    "review_value",
    "save_review",
    "verdict_label",
]

TALLY_MAX = 500
"""Longest review-tally line; with many disputed criteria the list is shortened."""

AGREE_ACTION_ID = "review_agree"
"""action_id of the Agree button on evaluation messages."""

DISAGREE_ACTION_ID = "review_disagree"
"""action_id of the Disagree… button on evaluation messages."""

REVIEW_BLOCK_ID = "review"
"""block_id of the actions block holding the review buttons."""

UNKNOWN_EVALUATION = (
    "I have no record of that grader iteration (it may be older than the bot's database), "
    "so it can't be reviewed."
)
"""Told to someone who reviews an iteration the store does not know."""

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


def grader_verdicts(evaluation: RubricEvaluation) -> dict[str, str]:
    """The grader's verdict per criterion name, in the evaluation's order.

    A scored dimension's verdict is its score; a criterion the grader gave no score is left
    out (nothing to agree or disagree with). A name repeated in a list rubric counts once: the
    grader's verdicts on the copies cannot be told apart.
    """
    scored = evaluation["kind"] == "scored"
    verdicts: dict[str, str] = {}
    for criterion in evaluation["criteria"]:
        name = criterion["name"]
        if scored:
            score = criterion["score"]
            verdict = str(score) if score is not None else None
        else:
            verdict = PASS if criterion["passed"] else FAIL
        if name and verdict is not None:
            verdicts.setdefault(name, verdict)
    return verdicts


def agree_verdicts(evaluation: RubricEvaluation) -> list[ReviewVerdict]:
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
        if where is None:
            return []
        rows = await store.recent_disagreements(
            where.team, where.channel, rubric.text, limit=CALIBRATION_EXAMPLES, calibrating_only=True
        )
        return calibration_examples(rows)

    return examples


# --- On the evaluation message: the tally and the buttons -----------------------------------------


@dataclasses.dataclass(frozen=True)
class ReviewTally:
    """Reviews of one evaluation: how many reviewers, and per criterion how many disagreed."""

    reviews: int
    disagreements: dict[str, int] = dataclasses.field(default_factory=dict)

    @classmethod
    def from_rows(cls, rows: Iterable[ReviewRow]) -> ReviewTally:
        """Tally stored review rows of one iteration (one row per reviewer and criterion)."""
        reviewers: set[str] = set()
        disagreements: dict[str, int] = {}
        for row in rows:
            reviewers.add(row.reviewer)
            if row.disagrees:
                disagreements[row.criterion] = disagreements.get(row.criterion, 0) + 1
        return cls(reviews=len(reviewers), disagreements=disagreements)

    def summary(self) -> str:
        """E.g. ``2 reviews · 1 disagreement on Clarity`` (mrkdwn, names escaped)."""
        if self.reviews == 0:
            return "No reviews yet"
        reviews = plural(self.reviews, "review")
        disputed = sorted(
            ((n, name) for name, n in self.disagreements.items() if n > 0),
            key=lambda item: (-item[0], item[1]),
        )
        if not disputed:
            return f"{reviews} · no disagreements"
        (first_count, first), *others = disputed
        parts = [f"{plural(first_count, 'disagreement')} on {escape(first)}"]
        parts += [f"{n} on {escape(name)}" for n, name in others]
        return truncate(f"{reviews} · {', '.join(parts)}", TALLY_MAX)


class _ReviewButton(BaseModel):
    """A review button's value: which grading run (``r``) and iteration (``i``) it reviews."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)

    r: Text
    i: Iteration


def review_value(grading_run_id: str, iteration: int) -> str:
    """The review buttons' value: compact JSON ``{"r": grading_run_id, "i": iteration}``."""
    value = _ReviewButton(r=grading_run_id, i=iteration).model_dump_json()
    if len(value) > BUTTON_VALUE_MAX:
        raise ValueError(f"grading_run_id is too long for a button value ({len(value)} chars)")
    return value


def parse_review_value(value: str) -> tuple[str, int]:
    """Read back ``(grading_run_id, iteration)`` from a review button's value.

    Raises ValueError naming what is wrong when the value is not one :func:`review_value` makes
    (a click can carry anything: its payload is only as trustworthy as whoever signed it).
    """
    try:
        button = _ReviewButton.model_validate_json(value)
    except ValidationError as exc:
        raise ValueError(f"not a review button's value ({problems(exc)})") from None
    return button.r, button.i


def review_controls(evaluation: RubricEvaluation, tally: ReviewTally | None = None) -> list[Block]:
    """What an evaluation message shows for team review: the tally once there is one, then the
    Agree / Disagree… buttons (none when the grader graded no criterion, e.g. a grader error)."""
    controls: list[Block] = []
    if tally is not None:
        controls.append(context_block(tally.summary()))
    if evaluation["criteria"]:
        value = review_value(evaluation["grading_run_id"], evaluation["iteration"])
        controls.append(
            ActionsBlock(
                block_id=REVIEW_BLOCK_ID,
                elements=[
                    ButtonElement(text="Agree", action_id=AGREE_ACTION_ID, value=value),
                    ButtonElement(text="Disagree…", action_id=DISAGREE_ACTION_ID, value=value),
                ],
            )
        )
    return controls


# --- Saving a review ------------------------------------------------------------------------------


async def save_review(
    store: Store, record: EvaluationRecord, reviewer: str, verdicts: Sequence[ReviewVerdict]
) -> None:
    """Store ``reviewer``'s verdicts on the iteration, replacing their earlier review of it."""
    await store.save_review(record.thread, record.grading_run_id, record.iteration, reviewer, verdicts)


async def refresh_tally(store: Store, client: AsyncWebClient, record: EvaluationRecord) -> None:
    """Re-render the iteration's message with the tally of every review stored for it."""
    async with store.locked_reviews(record.grading_run_id, record.iteration) as rows:
        controls = review_controls(record.evaluation, ReviewTally.from_rows(rows))
        message = render.evaluation_message(record.evaluation, review=controls)
        await attempt(
            client.chat_update(channel=record.channel, ts=record.message_ts, **message),
            f"show the review tally in {record.channel}",
        )


# --- The modal --------------------------------------------------------------------------------


def review_modal(
    evaluation: RubricEvaluation,
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
    gaps = {c["name"]: c["gap"].strip() for c in evaluation["criteria"]}
    context = ReviewContext(
        grading_run_id=evaluation["grading_run_id"],
        iteration=evaluation["iteration"],
        channel=channel,
        message_ts=message_ts,
        thread_ts=thread_ts,
    )
    choices = _verdict_choices(evaluation)
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


def _verdict_choices(evaluation: RubricEvaluation) -> tuple[str, ...]:
    """The verdicts a reviewer may give on the evaluation's criteria, in the menus' order (best first)."""
    return SCORES[::-1] if evaluation["kind"] == "scored" else (PASS, FAIL)


def _intro(evaluation: RubricEvaluation, *, revisiting: bool) -> SectionBlock:
    position = f"{evaluation['iteration'] + 1}/{evaluation['max_iterations']}"
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
    allowed = _verdict_choices(evaluation)
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
