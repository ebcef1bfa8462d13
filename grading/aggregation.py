"""Turning per-dimension scores into one verdict without letting a strong dimension hide a weak one.

The verdict is computed here, from the scores and the rubric's rules, never taken from a grader:

* any score under its dimension's ``fail_below`` is a FAIL, whatever the rest look like;
* otherwise ``weighted`` compares the weighted mean with ``pass_score``, ``min`` compares the
  lowest score (the weakest link), and ``per_dimension`` needs every dimension to reach
  ``pass_score`` (its reported score is the weighted mean, for information only);
* reaching ``pass_score`` is a PASS, anything else is REVIEW.

The score is rounded to two decimals and the verdict is taken on that rounded score, so a
weighted mean shown as 4.0 never reads REVIEW against a pass score of 4 because of float noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, NamedTuple

from grading.rubric import Rubric, quoted

Verdict = Literal["PASS", "REVIEW", "FAIL"]


class Aggregate(NamedTuple):
    """The outcome of one scored grading: overall score, verdict, dimensions under their floor."""

    score: float
    verdict: Verdict
    below_floor: tuple[str, ...]


def aggregate(rubric: Rubric, scores: Mapping[str, int]) -> Aggregate:
    """Aggregate 1–5 scores keyed by dimension name (any spelling ``rubric.match_name`` accepts).

    Raises ValueError for a list rubric, an unknown or missing dimension, or a score that is not
    a whole number from 1 to 5.
    """
    resolved = resolve_scores(rubric, scores)
    below_floor = tuple(
        d.name for d in rubric.dimensions if d.fail_below is not None and resolved[d.name] < d.fail_below
    )
    weights = rubric.weights()
    mean = round(sum(weights[name] * resolved[name] for name in rubric.names), 2)
    if rubric.aggregation == "min":
        score = float(min(resolved.values()))
        passed = score >= rubric.pass_score
    elif rubric.aggregation == "weighted":
        score = mean
        passed = score >= rubric.pass_score
    else:
        score = mean
        passed = all(s >= rubric.pass_score for s in resolved.values())
    verdict: Verdict = "FAIL" if below_floor else "PASS" if passed else "REVIEW"
    return Aggregate(score, verdict, below_floor)


def weakest_first(rubric: Rubric, scores: Mapping[str, int]) -> list[str]:
    """Dimension names, lowest score first; ties put the heavier dimension first.

    This is the order in which feedback is worth acting on. Equal score and weight keep rubric
    order.
    """
    resolved = resolve_scores(rubric, scores)
    weights = rubric.weights()
    return sorted(rubric.names, key=lambda name: (resolved[name], -weights[name]))


def resolve_scores(rubric: Rubric, scores: Mapping[str, int]) -> dict[str, int]:
    """Scores keyed by the rubric's own dimension names, checked to be complete and in range."""
    if not rubric.is_scored:
        raise ValueError("only scored rubrics can be aggregated; this one is a pass/fail list")
    resolved: dict[str, int] = {}
    for key, value in scores.items():
        name = rubric.match_name(key)
        if name is None:
            raise ValueError(
                f"unknown dimension {quoted(key)}; the rubric has {', '.join(map(quoted, rubric.names))}"
            )
        if name in resolved:
            raise ValueError(f"dimension {quoted(name)} is scored twice")
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 5:
            raise ValueError(f"score for {quoted(name)} must be a whole number from 1 to 5, not {value!r}")
        resolved[name] = value
    missing = [name for name in rubric.names if name not in resolved]
    if missing:
        raise ValueError(f"no score for {', '.join(map(quoted, missing))}")
    return resolved
