"""How far the grader can be trusted, and whether two dimensions measure the same thing.

Agreement is measured per criterion between teammates' reviews and the grader's verdicts:
percent agreement, the agreement a constant "always the majority" grader would get, and Cohen's
kappa — unweighted for pass/fail verdicts, quadratic-weighted for 1–5 scores, where a 4 against
a 5 is a smaller disagreement than a 1 against a 5. Kappa comes from scikit-learn and correlation
from numpy; this module only decides when the numbers are defined and what they mean.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from grading.rubric import quoted

MIN_REVIEWS_FOR_KAPPA = 10
"""Fewer reviewed verdicts than this and kappa is too noisy to act on: the report says how many
more are needed instead of flagging the criterion."""

KAPPA_TARGET = 0.6
"""The bar for trusting the grader on a criterion (substantial agreement on the usual reading of
kappa): below it, the criterion's wording or anchors need rewriting."""

CORRELATION_THRESHOLD = 0.9
"""Two dimensions whose scores correlate above this measure the same thing: merge or drop one."""

MIN_PAIRED_SCORES = 3
"""Fewest paired scores for which a correlation is reported; with two points r is always ±1."""

SCORE_LABELS = (1, 2, 3, 4, 5)
"""The full 1–5 scale, passed to scikit-learn so weighted kappa's distances span every score,
including ones nobody happened to use."""

Weights = Literal["quadratic", "linear"]


def kappa(human: Sequence[Any], judge: Sequence[Any], weights: Weights | None = None) -> float | None:
    """Cohen's kappa between two raters, exactly as ``sklearn.metrics.cohen_kappa_score``.

    Returns None where kappa is undefined — fewer than two ratings, or both raters always giving
    one and the same label — so callers never see nan. Raises ValueError when the sequences
    differ in length. With ``weights`` and labels that are all 1–5 scores, distances span the
    whole 1–5 scale.
    """
    _check_paired(human, judge)
    if len(human) < 2 or len({*human, *judge}) < 2:
        return None
    # Imported here: scikit-learn takes seconds to import, and the bot and the
    # middleware import `grading` at start-up without ever needing kappa there.
    from sklearn.metrics import cohen_kappa_score

    labels = list(SCORE_LABELS) if weights and _all_scores([*human, *judge]) else None
    # The check above is exactly when scikit-learn's denominators vanish, so this is never nan.
    return float(cohen_kappa_score(human, judge, labels=labels, weights=weights))


def percent_agreement(human: Sequence[Any], judge: Sequence[Any]) -> float | None:
    """Share of items on which both raters gave the same label; None with no items."""
    _check_paired(human, judge)
    if not human:
        return None
    return float(np.mean([h == j for h, j in zip(human, judge, strict=True)]))


def majority_baseline(human: Sequence[Any]) -> float | None:
    """Agreement a grader would get by always giving the humans' most common label.

    Percent agreement means little unless it beats this; None with no items.
    """
    if not human:
        return None
    _, count = Counter(human).most_common(1)[0]
    return count / len(human)


@dataclass(frozen=True)
class CriterionAgreement:
    """Human–grader agreement on one criterion or dimension."""

    criterion: str
    n: int
    percent_agreement: float | None
    kappa: float | None
    baseline: float | None
    weights: str | None
    enough: bool
    flagged: bool
    note: str


def agreement_report(
    pairs: Mapping[str, Sequence[tuple[Any, Any]]],
    *,
    min_reviews: int = MIN_REVIEWS_FOR_KAPPA,
) -> list[CriterionAgreement]:
    """Agreement per criterion from ``(human_label, judge_label)`` pairs, in mapping order.

    Labels are bools (pass/fail: unweighted kappa) or ints 1–5 (scores: quadratic kappa); one
    criterion's labels must all be of one kind. A criterion is flagged only when it has at least
    ``min_reviews`` pairs and a defined kappa under :data:`KAPPA_TARGET`.
    """
    return [_criterion_agreement(name, list(rows), min_reviews) for name, rows in pairs.items()]


def _criterion_agreement(criterion: str, rows: list[tuple[Any, Any]], min_reviews: int) -> CriterionAgreement:
    human = [h for h, _ in rows]
    judge = [j for _, j in rows]
    weights = _weights_for(criterion, [*human, *judge])
    value = kappa(human, judge, weights)
    n = len(rows)
    enough = n >= min_reviews
    flagged = enough and value is not None and value < KAPPA_TARGET
    return CriterionAgreement(
        criterion=criterion,
        n=n,
        percent_agreement=percent_agreement(human, judge),
        kappa=value,
        baseline=majority_baseline(human),
        weights=weights,
        enough=enough,
        flagged=flagged,
        note=_note(n, value, enough=enough, flagged=flagged, min_reviews=min_reviews),
    )


def _weights_for(criterion: str, labels: Sequence[Any]) -> Weights | None:
    if all(isinstance(label, bool) for label in labels):
        return None
    if _all_scores(labels):
        return "quadratic"
    raise ValueError(
        f"criterion {quoted(criterion)}: labels must all be pass/fail booleans or all 1–5 scores"
    )


def _all_scores(labels: Sequence[Any]) -> bool:
    return all(
        isinstance(label, int) and not isinstance(label, bool) and label in SCORE_LABELS for label in labels
    )


def _note(n: int, value: float | None, *, enough: bool, flagged: bool, min_reviews: int) -> str:
    if n == 0:
        return "no reviews yet"
    if not enough:
        reviews = "review" if n == 1 else "reviews"
        return f"{n} {reviews} so far; κ needs at least {min_reviews}"
    if value is None:
        return "one label only: κ undefined"
    if flagged:
        return f"κ {value:.2f} is under {KAPPA_TARGET}: reword this criterion or its anchors"
    return ""


def correlated_dimensions(
    scores_by_dimension: Mapping[str, Sequence[float]],
    threshold: float = CORRELATION_THRESHOLD,
) -> list[tuple[str, str, float]]:
    """Pairs of dimensions whose scores correlate above ``threshold`` (Pearson), strongest first.

    Every series holds one score per graded answer, in the same order, so all must have the same
    length (ValueError otherwise). Pairs where r is undefined or meaningless are skipped rather
    than reported as nan: fewer than :data:`MIN_PAIRED_SCORES` answers, or a dimension whose
    score never varies.
    """
    series = {name: np.asarray(values, dtype=float) for name, values in scores_by_dimension.items()}
    if len({len(values) for values in series.values()}) > 1:
        raise ValueError("every dimension needs one score per graded answer; lengths differ")
    found = []
    for (a, x), (b, y) in itertools.combinations(series.items(), 2):
        if len(x) < MIN_PAIRED_SCORES or np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        r = float(np.corrcoef(x, y)[0, 1])
        if r > threshold:
            found.append((a, b, r))
    return sorted(found, key=lambda pair: pair[2], reverse=True)


def _check_paired(human: Sequence[Any], judge: Sequence[Any]) -> None:
    if len(human) != len(judge):
        raise ValueError(f"{len(human)} human labels but {len(judge)} judge labels")
