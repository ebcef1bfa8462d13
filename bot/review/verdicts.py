"""What a review verdict is: the grader's per criterion, a reviewer's, and the label agreement uses.

A verdict on a criterion is a string: ``"pass"``/``"fail"`` for a list rubric's criteria, ``"1"``..``"5"``
for a scored rubric's dimensions (see :class:`bot.db.store.ReviewVerdict`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from bot.db.reviews import ReviewVerdict
from bot.vocabulary.verdicts import Verdict
from grading import RubricEvaluation

PASS: Final = "pass"
"""The verdict on a list rubric's criterion that the answer meets."""

FAIL: Final = "fail"
"""The verdict on a list rubric's criterion that the answer misses."""

CANNOT_TELL: Final = "cannot_tell"
"""The grader's verdict on a criterion it could not tell: a person's to judge, outside agreement."""

SCORES: tuple[Verdict, ...] = ("1", "2", "3", "4", "5")
"""Verdict strings of a scored rubric's dimensions, worst first."""

VERDICT_WORDS: Mapping[str, str] = {
    PASS: "✅ Pass",
    FAIL: "❌ Fail",
    CANNOT_TELL: "❔ Can't tell",
    "1": "1 (worst)",
    "5": "5 (best)",
}
"""How a verdict reads in the modal's menus; scores 2–4 read as themselves."""


def grader_verdicts(evaluation: RubricEvaluation) -> dict[str, Verdict]:
    """The grader's verdict per criterion name, in the evaluation's order.

    A scored dimension's verdict is its score; a criterion the grader gave no score is left
    out (nothing to agree or disagree with). A name repeated in a list rubric counts once: the
    grader's verdicts on the copies cannot be told apart.
    """
    scored = evaluation["kind"] == "scored"
    verdicts: dict[str, Verdict] = {}
    for criterion in evaluation["criteria"]:
        name = criterion["name"]
        verdict: Verdict | None
        if scored:
            score = criterion["score"]
            verdict = SCORES[score - 1] if score is not None else None
        elif criterion.get("cannot_tell"):
            verdict = CANNOT_TELL
        else:
            verdict = PASS if criterion["passed"] else FAIL
        if name and verdict is not None:
            verdicts.setdefault(name, verdict)
    return verdicts


def agree_verdicts(evaluation: RubricEvaluation) -> list[ReviewVerdict]:
    """The review recorded by Agree: the reviewer accepts every verdict of the iteration (a criterion
    the grader could not tell has none to accept: it waits for a Disagree… form's verdict)."""
    return [
        ReviewVerdict(name, verdict, verdict)
        for name, verdict in grader_verdicts(evaluation).items()
        if verdict != CANNOT_TELL
    ]


def is_judged(verdict: str) -> bool:
    """Whether the grader gave this verdict (rather than leaving the criterion to a person)."""
    return verdict != CANNOT_TELL


def verdict_label(verdict: str) -> bool | int:
    """A stored verdict string as the label agreement is computed on: pass → True, "3" → 3."""
    if verdict in (PASS, FAIL):
        return verdict == PASS
    if verdict in SCORES:
        return int(verdict)
    raise ValueError(f"{verdict!r} is not a verdict; expected pass, fail or 1–5")


def verdict_words(verdict: str) -> str:
    """A verdict as the grader's prompt quotes it: scores read as ``2/5``."""
    return f"{verdict}/5" if verdict in SCORES else verdict


def verdict_choices(evaluation: RubricEvaluation) -> tuple[Verdict, ...]:
    """The verdicts a reviewer may give on the evaluation's criteria, in the menus' order (best first)."""
    return SCORES[::-1] if evaluation["kind"] == "scored" else (PASS, FAIL)
