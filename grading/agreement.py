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

BOOTSTRAP_RESAMPLES = 1000
"""Resamples behind a bootstrap interval: enough for steady 2.5th and 97.5th percentiles, while
each one costs two κ computations."""

BOOTSTRAP_CONFIDENCE = 0.95
"""Coverage of a bootstrap interval."""

BOOTSTRAP_SEED = 0
"""Seed of the resampling, so one set of verdicts always gives the same interval."""

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


@dataclass(frozen=True)
class DifferenceIntervals:
    """Bootstrap intervals on how much a second judge's agreement with the humans beats the first's.

    Each is ``(low, high)`` of after − before, or None where too few resamples define it.
    """

    agreement: tuple[float, float] | None
    kappa: tuple[float, float] | None


def difference_intervals(
    groups: Sequence[Sequence[tuple[Any, Any, Any]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = BOOTSTRAP_CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> DifferenceIntervals:
    """Percentile-bootstrap intervals on after − before percent agreement and κ with the humans.

    Each group holds ``(human, before, after)`` labels of one graded item — every reviewer's
    verdict on every criterion of one answer, say — and whole groups are resampled, because the
    labels of one item are not independent. Labels are pass/fail booleans (unweighted κ) or
    1–5 scores (quadratic κ), as in :func:`agreement_report`. Resamples where κ is undefined on
    either side are left out of κ's interval; it is None when that leaves fewer than half.
    """
    groups = [group for group in groups if group]
    flat = [label for group in groups for triple in group for label in triple]
    if not groups:
        return DifferenceIntervals(None, None)
    weights = _weights_for("labels", flat)
    labels = list(SCORE_LABELS) if weights else [False, True]
    before, after = (_confusions(groups, labels, side) for side in (1, 2))
    picks = np.random.default_rng(seed).integers(0, len(groups), size=(resamples, len(groups)))
    counts = np.zeros((resamples, len(groups)))
    np.add.at(counts, (np.arange(resamples)[:, None], picks), 1)
    was, now = (np.einsum("rg,gij->rij", counts, matrices) for matrices in (before, after))
    tail = (1 - confidence) / 2 * 100

    def interval(differences: np.ndarray) -> tuple[float, float] | None:
        defined = differences[~np.isnan(differences)]
        if len(defined) < resamples / 2:
            return None
        low, high = np.percentile(defined, [tail, 100 - tail])
        return float(low), float(high)

    return DifferenceIntervals(
        agreement=interval(_trace_share(now) - _trace_share(was)),
        kappa=interval(confusion_kappa(now, weights) - confusion_kappa(was, weights)),
    )


def _confusions(groups: Sequence[Sequence[tuple[Any, Any, Any]]], labels: list[Any], side: int) -> np.ndarray:
    """Per group, the confusion matrix of human labels (rows) against one judge's (columns)."""
    index = {label: i for i, label in enumerate(labels)}
    matrices = np.zeros((len(groups), len(labels), len(labels)))
    for g, group in enumerate(groups):
        for triple in group:
            matrices[g, index[triple[0]], index[triple[side]]] += 1
    return matrices


def _trace_share(matrices: np.ndarray) -> np.ndarray:
    return np.trace(matrices, axis1=1, axis2=2) / matrices.sum(axis=(1, 2))


def confusion_kappa(matrices: np.ndarray, weights: Weights | None) -> np.ndarray:
    """Cohen's κ of each of many confusion matrices at once (shape ``(k, L, L)``); nan where undefined.

    The same formula as ``sklearn.metrics.cohen_kappa_score`` (1 − weighted observed over
    weighted expected disagreement), vectorised: a bootstrap needs thousands of κ and
    scikit-learn's input checks cost milliseconds per call. Use :func:`kappa` for one κ.
    """
    size = matrices.shape[-1]
    rows, columns = np.indices((size, size))
    penalty = {
        None: (rows != columns).astype(float),
        "linear": np.abs(rows - columns),
        "quadratic": (rows - columns) ** 2,
    }
    w = penalty[weights]
    totals = matrices.sum(axis=(1, 2))
    expected = np.einsum("ki,kj->kij", matrices.sum(axis=2), matrices.sum(axis=1)) / totals[:, None, None]
    observed_cost = (w * matrices).sum(axis=(1, 2))
    expected_cost = (w * expected).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(expected_cost > 0, 1 - observed_cost / expected_cost, np.nan)


def _check_paired(human: Sequence[Any], judge: Sequence[Any]) -> None:
    if len(human) != len(judge):
        raise ValueError(f"{len(human)} human labels but {len(judge)} judge labels")
