"""Several grader samples per iteration: asked together, and their verdicts put to a vote.

With ``samples`` above one, the grader is asked that many times at once with the same payload (so
every sample after the fixed part's first write reads it from the provider's prompt cache). Per
criterion the verdict is the samples' majority and its **confidence** the share of the samples that
gave it; an even split is "can't tell" (a person decides), never a coin toss. The confidence is what
`grading.selective.calibrate` sets a threshold on.

The grading step drives the samples together (`together`): each sample is its own generator of
grader calls, as a single grade is, and every round yields the calls still pending as one
`Together`, which the middleware's sync hook answers one after the other and its async hook at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from grading.grader import CriterionGrade

CallT = TypeVar("CallT")
ResultT = TypeVar("ResultT")

SPLIT_GAP = (
    "The grader's {samples} samples split evenly on this criterion ({votes}), so it is left to a person."
)
"""The reason a criterion whose samples split evenly gives for being "can't tell"."""


@dataclass(frozen=True)
class Together(Generic[CallT]):
    """Grader calls to make at once, one per sample still being graded; answered with the list of
    their outcomes (an answer, or the exception the call raised) in the same order."""

    calls: tuple[CallT, ...]


@dataclass(frozen=True)
class Graded:
    """The grader's usable answer: an item per criterion (by rubric position) and what is left.

    ``confidence`` is, per criterion position, the share of the samples that gave its verdict (1
    with one sample); ``escalated`` the positions whose item is the escalation model's.
    """

    claimed: str
    explanation: str
    items: dict[int, Any]
    unmatched: list[Any]
    confidence: dict[int, float] = field(default_factory=dict)
    samples: int = 1
    escalated: frozenset[int] = frozenset()


def together(
    steps: Sequence[Generator[CallT, Any, ResultT]],
) -> Generator[Together[CallT], Sequence[Any], list[ResultT | Exception]]:
    """Run each of `steps` (a generator of calls returning its result) to its end, yielding their
    pending calls together each round; the results (or the exception a step ended with) in order."""
    pending: dict[int, CallT] = {}
    results: dict[int, ResultT | Exception] = {}
    for index, step in enumerate(steps):
        _advance(index, step, None, pending, results)
    while pending:
        order = sorted(pending)
        outcomes = yield Together(tuple(pending[index] for index in order))
        pending = {}
        for index, outcome in zip(order, outcomes, strict=True):
            _advance(index, steps[index], outcome, pending, results)
    return [results[index] for index in range(len(steps))]


def _advance(
    index: int,
    step: Generator[CallT, Any, ResultT],
    outcome: Any,
    pending: dict[int, CallT],
    results: dict[int, ResultT | Exception],
) -> None:
    """Feed one step its call's outcome (None to start it); note its next call or how it ended."""
    try:
        pending[index] = step.throw(outcome) if isinstance(outcome, Exception) else step.send(outcome)
    except StopIteration as done:
        results[index] = done.value
    except Exception as exc:
        results[index] = exc


def vote(outcomes: Sequence[Graded | Exception], scored: bool) -> Graded:
    """One answer from the samples' answers: per criterion the majority verdict, with its share.

    Samples that failed (an exception) do not vote; when none answered, the first failure is
    raised. The grader's claim that the rubric cannot be evaluated (``failed``) holds when most of
    the samples that answered made it. A scored dimension's verdict is its most frequent score (on
    an even split, the lower: a dimension is not passed on a tie).
    """
    answered = [outcome for outcome in outcomes if isinstance(outcome, Graded)]
    if not answered:
        raise next(outcome for outcome in outcomes if isinstance(outcome, Exception))
    if len(answered) == 1:
        only = answered[0]
        return Graded(
            only.claimed, only.explanation, only.items, only.unmatched, dict.fromkeys(only.items, 1.0)
        )
    gave_up = [graded for graded in answered if graded.claimed == "failed"]
    if len(gave_up) * 2 > len(answered):
        return Graded("failed", gave_up[0].explanation, {}, [], samples=len(answered))
    voting = [graded for graded in answered if graded.claimed != "failed"]
    items: dict[int, Any] = {}
    confidence: dict[int, float] = {}
    for position in voting[0].items:
        graded_items = [graded.items[position] for graded in voting]
        items[position], confidence[position] = _majority(graded_items, scored)
    first = voting[0]
    return Graded(first.claimed, first.explanation, items, first.unmatched, confidence, samples=len(voting))


def _majority(graded_items: Sequence[Any], scored: bool) -> tuple[Any, float]:
    """The item giving the most frequent verdict among `graded_items` (one per sample) and its share."""
    verdicts = [_verdict(item, scored) for item in graded_items]
    counts = Counter(verdicts).most_common()
    top, top_count = counts[0]
    share = top_count / len(verdicts)
    tied = [verdict for verdict, count in counts if count == top_count]
    if len(tied) > 1 and not scored:
        votes = ", ".join(f"{count} {verdict}" for verdict, count in counts)
        split = CriterionGrade(
            name=graded_items[0].name,
            passed=False,
            gap=SPLIT_GAP.format(samples=len(verdicts), votes=votes),
            cannot_tell=True,
        )
        return split, share
    if len(tied) > 1:
        top = min(tied, key=int)  # scores: the lowest of the tied
    return next(item for item, verdict in zip(graded_items, verdicts, strict=True) if verdict == top), share


def _verdict(item: Any, scored: bool) -> str | int:
    """What a sample's item says, as votes are counted: a score, or pass / fail / can't tell."""
    if scored:
        return item.score
    if item.cannot_tell:
        return "can't tell"
    return "pass" if item.passed else "fail"
