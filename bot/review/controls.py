"""On an evaluation message: the review tally and the Agree / Disagree… (blind: Review…) buttons with
their value."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, ValidationError
from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement

from bot.db.reviews import ReviewRow
from bot.slack.blocks import BUTTON_VALUE_MAX, context_block, plural
from bot.slack.mrkdwn import escape, truncate
from bot.slack.payloads import Iteration, Text, problems
from grading import RubricEvaluation

TALLY_MAX = 500
"""Longest review-tally line; with many disputed criteria the list is shortened."""

AGREE_ACTION_ID = "review_agree"
"""action_id of the Agree button on evaluation messages."""

DISAGREE_ACTION_ID = "review_disagree"
"""action_id of the Disagree… button on evaluation messages."""

REVIEW_ACTION_ID = "review_open"
"""action_id of the Review… button that replaces Agree / Disagree… in blind mode (opens the form)."""

SECOND_REVIEW_WANTED = (
    "a second review is wanted: anyone but its first reviewer, please review this iteration "
    "(what the first review said shows once it is in)"
)
"""On the tally of an iteration picked for double review that has one reviewer so far."""

REVIEW_BLOCK_ID = "review"
"""block_id of the actions block holding the review buttons."""


@dataclasses.dataclass(frozen=True)
class ReviewTally:
    """Reviews of one evaluation: how many reviewers, and per criterion how many disagreed."""

    reviews: int
    disagreements: dict[str, int] = dataclasses.field(default_factory=dict)
    second_wanted: bool = False
    """A second review is wanted (double review): the first one's disagreements stay unsaid meanwhile,
    so that they do not steer the second reviewer."""

    @classmethod
    def from_rows(cls, rows: Iterable[ReviewRow], *, second_wanted: bool = False) -> ReviewTally:
        """Tally stored review rows of one iteration (one row per reviewer and criterion)."""
        reviewers: set[str] = set()
        disagreements: dict[str, int] = {}
        for row in rows:
            reviewers.add(row.reviewer)
            if row.disagrees:
                disagreements[row.criterion] = disagreements.get(row.criterion, 0) + 1
        return cls(reviews=len(reviewers), disagreements=disagreements, second_wanted=second_wanted)

    def summary(self) -> str:
        """E.g. ``2 reviews · 1 disagreement on Clarity`` (mrkdwn, names escaped)."""
        if self.reviews == 0:
            return "No reviews yet"
        reviews = plural(self.reviews, "review")
        if self.second_wanted:
            return f"{reviews} · 🔁 {SECOND_REVIEW_WANTED}"
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


def review_controls(
    evaluation: RubricEvaluation, tally: ReviewTally | None = None, *, blind: bool = False
) -> list[Block]:
    """What an evaluation message shows for team review: the tally once there is one, then the
    Agree / Disagree… buttons, or in ``blind`` mode the one Review… button that opens the form
    (none when the grader graded no criterion, e.g. a grader error)."""
    controls: list[Block] = []
    if tally is not None:
        controls.append(context_block(tally.summary()))
    if evaluation["criteria"]:
        value = review_value(evaluation["grading_run_id"], evaluation["iteration"])
        buttons = (
            [ButtonElement(text="Review…", action_id=REVIEW_ACTION_ID, value=value)]
            if blind
            else [
                ButtonElement(text="Agree", action_id=AGREE_ACTION_ID, value=value),
                ButtonElement(text="Disagree…", action_id=DISAGREE_ACTION_ID, value=value),
            ]
        )
        controls.append(ActionsBlock(block_id=REVIEW_BLOCK_ID, elements=buttons))
    return controls
