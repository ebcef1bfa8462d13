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
from collections.abc import Hashable, Mapping, Sequence
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


Interval = tuple[float, float]
"""A 95 % interval ``(low, high)``."""


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
    """Enough pairs and κ under :data:`KAPPA_TARGET`: its whole interval when there is one, else κ."""
    note: str
    clusters: int = 0
    """Distinct clusters (graded runs, say) the pairs come from; 0 when none were given."""
    agreement_interval: Interval | None = None
    """Cluster-bootstrap interval on percent agreement, once there are enough pairs."""
    kappa_interval: Interval | None = None
    """Cluster-bootstrap interval on κ, once there are enough pairs and it is defined."""


def agreement_report(
    pairs: Mapping[str, Sequence[tuple[Any, Any]]],
    *,
    min_reviews: int = MIN_REVIEWS_FOR_KAPPA,
    clusters: Mapping[str, Sequence[Hashable]] | None = None,
) -> list[CriterionAgreement]:
    """Agreement per criterion from ``(human_label, judge_label)`` pairs, in mapping order.

    Labels are bools (pass/fail: unweighted kappa) or ints 1–5 (scores: quadratic kappa); one
    criterion's labels must all be of one kind. With ``clusters`` (per criterion, one key per pair:
    the graded run it comes from, say) agreement and κ get cluster-bootstrap intervals once there
    are ``min_reviews`` pairs, and a criterion is flagged when κ's whole interval lies under
    :data:`KAPPA_TARGET`; without, when it has ``min_reviews`` pairs and κ under the target.
    """
    return [
        _criterion_agreement(name, list(rows), min_reviews, None if clusters is None else clusters[name])
        for name, rows in pairs.items()
    ]


def _criterion_agreement(
    criterion: str, rows: list[tuple[Any, Any]], min_reviews: int, clusters: Sequence[Hashable] | None
) -> CriterionAgreement:
    human = [h for h, _ in rows]
    judge = [j for _, j in rows]
    weights = _weights_for(criterion, [*human, *judge])
    value = kappa(human, judge, weights)
    n = len(rows)
    enough = n >= min_reviews
    intervals = agreement_intervals(_clustered(rows, clusters)) if clusters is not None and enough else None
    kappa_interval = intervals.kappa if intervals and value is not None else None
    if intervals is None:
        flagged = enough and value is not None and value < KAPPA_TARGET
    else:
        flagged = kappa_interval is not None and kappa_interval[1] < KAPPA_TARGET
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
        clusters=len(set(clusters)) if clusters is not None else 0,
        agreement_interval=intervals.agreement if intervals else None,
        kappa_interval=kappa_interval,
    )


def _clustered(rows: Sequence[tuple[Any, Any]], clusters: Sequence[Hashable]) -> list[list[tuple[Any, Any]]]:
    """The pairs grouped by their cluster key, in order of first appearance."""
    if len(clusters) != len(rows):
        raise ValueError(f"{len(rows)} pairs but {len(clusters)} cluster keys")
    groups: dict[Hashable, list[tuple[Any, Any]]] = {}
    for key, pair in zip(clusters, rows, strict=True):
        groups.setdefault(key, []).append(pair)
    return list(groups.values())


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
class Intervals:
    """Bootstrap intervals on percent agreement and κ (or on their differences between two judges).

    Each is ``(low, high)``, or None where too few resamples define it.
    """

    agreement: Interval | None
    kappa: Interval | None


DifferenceIntervals = Intervals
"""Intervals on how much a second judge's agreement with the humans beats the first's (after − before)."""


def difference_intervals(
    groups: Sequence[Sequence[tuple[Any, Any, Any]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = BOOTSTRAP_CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> Intervals:
    """Percentile-bootstrap intervals on after − before percent agreement and κ with the humans.

    Each group holds ``(human, before, after)`` labels of one graded item — every reviewer's
    verdict on every criterion of one answer, say — and whole groups are resampled, because the
    labels of one item are not independent. Labels are pass/fail booleans (unweighted κ) or
    1–5 scores (quadratic κ), as in :func:`agreement_report`. Resamples where κ is undefined on
    either side are left out of κ's interval; it is None when that leaves fewer than half.
    """
    groups = [group for group in groups if group]
    if not groups:
        return Intervals(None, None)
    weights, labels = _scale([label for group in groups for triple in group for label in triple])
    before, after = (_confusions(groups, labels, side) for side in (1, 2))
    counts = resampled_counts(len(groups), resamples, seed)
    was, now = (np.einsum("rg,gij->rij", counts, matrices) for matrices in (before, after))
    return Intervals(
        agreement=percentile_interval(_trace_share(now) - _trace_share(was), confidence),
        kappa=percentile_interval(confusion_kappa(now, weights) - confusion_kappa(was, weights), confidence),
    )


def agreement_intervals(
    groups: Sequence[Sequence[tuple[Any, Any]]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = BOOTSTRAP_CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> Intervals:
    """Percentile-bootstrap intervals on one judge's percent agreement and κ with the humans.

    Each group holds the ``(human, judge)`` labels of one cluster — every reviewed verdict of one
    graded run, say, whose iterations are alike — and whole groups are resampled, as
    :func:`difference_intervals` does. Labels as in :func:`agreement_report`.
    """
    groups = [group for group in groups if group]
    if not groups:
        return Intervals(None, None)
    weights, labels = _scale([label for group in groups for pair in group for label in pair])
    counts = resampled_counts(len(groups), resamples, seed)
    totals = np.einsum("rg,gij->rij", counts, _confusions(groups, labels, 1))
    return Intervals(
        agreement=percentile_interval(_trace_share(totals), confidence),
        kappa=percentile_interval(confusion_kappa(totals, weights), confidence),
    )


def share_interval(
    groups: Sequence[tuple[int, int]],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    confidence: float = BOOTSTRAP_CONFIDENCE,
    seed: int = BOOTSTRAP_SEED,
) -> Interval | None:
    """Percentile-bootstrap interval on a share ``sum(hits) / sum(total)`` over clusters of
    ``(hits, total)`` (a run's judged criteria of all it graded, say), whole clusters resampled."""
    groups = [group for group in groups if group[1]]
    if not groups:
        return None
    hits, totals = (np.asarray(column, dtype=float) for column in zip(*groups, strict=True))
    counts = resampled_counts(len(groups), resamples, seed)
    return percentile_interval((counts @ hits) / (counts @ totals), confidence)


def resampled_counts(
    groups: int, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """How often each of ``groups`` clusters is drawn in each of ``resamples`` bootstrap resamples
    (shape ``(resamples, groups)``); each resample draws ``groups`` clusters with replacement."""
    picks = np.random.default_rng(seed).integers(0, groups, size=(resamples, groups))
    counts = np.zeros((resamples, groups))
    np.add.at(counts, (np.arange(resamples)[:, None], picks), 1)
    return counts


def percentile_interval(values: np.ndarray, confidence: float = BOOTSTRAP_CONFIDENCE) -> Interval | None:
    """The central ``confidence`` percentile interval of resampled values, nan ones left out; None
    when fewer than half of them are defined."""
    defined = values[~np.isnan(values)]
    if len(defined) < len(values) / 2:
        return None
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(defined, [tail, 100 - tail])
    return float(low), float(high)


def _scale(labels: Sequence[Any]) -> tuple[Weights | None, list[Any]]:
    """κ's weights and the full label set for pass/fail booleans or 1–5 scores."""
    weights = _weights_for("labels", labels)
    return weights, list(SCORE_LABELS) if weights else [False, True]


def _confusions(groups: Sequence[Sequence[tuple[Any, ...]]], labels: list[Any], side: int) -> np.ndarray:
    """Per group, the confusion matrix of human labels (rows) against one judge's (columns)."""
    index = {label: i for i, label in enumerate(labels)}
    matrices = np.zeros((len(groups), len(labels), len(labels)))
    for g, group in enumerate(groups):
        for labelled in group:
            matrices[g, index[labelled[0]], index[labelled[side]]] += 1
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
