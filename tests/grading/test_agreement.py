import math
import random

import numpy as np
import pytest
from sklearn.metrics import cohen_kappa_score

from grading.agreement import (
    KAPPA_TARGET,
    MIN_REVIEWS_FOR_KAPPA,
    CriterionAgreement,
    DifferenceIntervals,
    agreement_report,
    confusion_kappa,
    correlated_dimensions,
    difference_intervals,
    kappa,
    majority_baseline,
    percent_agreement,
)

# --- kappa ------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_kappa_on_scores_equals_scikit_learn_over_the_full_scale(seed, weights):
    rng = random.Random(seed)
    human = [rng.randint(1, 5) for _ in range(30)]
    judge = [min(5, max(1, h + rng.choice([-2, -1, 0, 0, 0, 1]))) for h in human]
    expected = cohen_kappa_score(human, judge, weights=weights, labels=[1, 2, 3, 4, 5])
    assert kappa(human, judge, weights) == pytest.approx(expected)


@pytest.mark.parametrize("seed", range(5))
def test_kappa_on_pass_fail_equals_scikit_learn(seed):
    rng = random.Random(100 + seed)
    human = [rng.random() < 0.6 for _ in range(25)]
    judge = [h if rng.random() < 0.8 else not h for h in human]
    assert kappa(human, judge) == pytest.approx(cohen_kappa_score(human, judge))


def test_weighted_kappa_measures_distance_on_the_whole_1_to_5_scale():
    # Only 1, 2 and 5 are used: without the full scale, 2 -> 5 would look like a one-step miss.
    human = [1, 2, 5, 2, 1, 5]
    judge = [1, 5, 2, 2, 2, 5]
    full_scale = cohen_kappa_score(human, judge, weights="quadratic", labels=[1, 2, 3, 4, 5])
    used_only = cohen_kappa_score(human, judge, weights="quadratic")
    assert full_scale != pytest.approx(used_only)
    assert kappa(human, judge, "quadratic") == pytest.approx(full_scale)


def test_kappa_of_a_2x2_table_checked_by_hand():
    # both pass 4, both fail 3, human pass/judge fail 2, human fail/judge pass 1
    human = [True] * 4 + [False] * 3 + [True] * 2 + [False] * 1
    judge = [True] * 4 + [False] * 3 + [False] * 2 + [True] * 1
    # p_o = 7/10; p_e = .6 * .5 + .4 * .5 = .5; kappa = (.7 - .5) / (1 - .5) = .4
    assert kappa(human, judge) == pytest.approx(0.4)


def test_quadratic_kappa_checked_by_hand():
    assert kappa([1, 5], [1, 5], "quadratic") == pytest.approx(1.0)
    # Opposite ends every time: observed weighted disagreement 2 * 16 against 16 expected.
    assert kappa([1, 5], [5, 1], "quadratic") == pytest.approx(-1.0)


@pytest.mark.parametrize(
    ("human", "judge", "weights"),
    [
        ([], [], None),
        ([True], [False], None),
        ([4], [4], "quadratic"),
        ([True] * 6, [True] * 6, None),
        ([3, 3, 3], [3, 3, 3], "quadratic"),
    ],
)
def test_kappa_is_none_where_undefined(human, judge, weights):
    assert kappa(human, judge, weights) is None


def test_raters_each_sticking_to_a_different_label_get_kappa_zero_not_none():
    value = kappa([True] * 5, [False] * 5)
    assert value == 0.0
    assert not math.isnan(value)


def test_kappa_rejects_sequences_of_different_lengths():
    with pytest.raises(ValueError, match="3 human labels but 2 judge labels"):
        kappa([1, 2, 3], [1, 2])


# --- percent agreement and baseline -------------------------------------------------------------


def test_percent_agreement():
    assert percent_agreement([True, False, True, True], [True, True, True, False]) == 0.5
    assert percent_agreement([], []) is None
    with pytest.raises(ValueError):
        percent_agreement([1], [])


def test_majority_baseline_is_what_always_saying_the_majority_would_score():
    assert majority_baseline([True, True, True, False]) == 0.75
    assert majority_baseline([3, 4, 4, 5, 4]) == 0.6
    assert majority_baseline([]) is None


# --- report -----------------------------------------------------------------------------------


def seeded_pairs(seed: int, n: int, flip: float, labels: list) -> list[tuple]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        human = rng.choice(labels)
        pairs.append((human, rng.choice(labels) if rng.random() < flip else human))
    return pairs


def test_report_numbers_for_a_seeded_set():
    pairs = {
        "Mentions spring": seeded_pairs(1, 40, 0.1, [True, False]),
        "Tone": seeded_pairs(2, 40, 0.7, [1, 2, 3, 4, 5]),
    }
    spring, tone = agreement_report(pairs)

    human, judge = zip(*pairs["Mentions spring"], strict=True)
    assert spring.criterion == "Mentions spring"
    assert spring.n == 40
    assert spring.weights is None
    assert spring.kappa == pytest.approx(cohen_kappa_score(human, judge))
    assert spring.percent_agreement == pytest.approx(sum(h == j for h, j in pairs["Mentions spring"]) / 40)
    assert spring.baseline == pytest.approx(max(human.count(True), human.count(False)) / 40)
    assert spring.kappa >= KAPPA_TARGET
    assert (spring.enough, spring.flagged, spring.note) == (True, False, "")

    human, judge = zip(*pairs["Tone"], strict=True)
    assert tone.weights == "quadratic"
    assert tone.kappa == pytest.approx(
        cohen_kappa_score(human, judge, weights="quadratic", labels=[1, 2, 3, 4, 5])
    )
    assert tone.kappa < KAPPA_TARGET
    assert tone.flagged
    assert tone.note.startswith(f"κ {tone.kappa:.2f} is under {KAPPA_TARGET}")


def test_too_few_reviews_are_reported_not_flagged():
    disagreeing = [(True, False), (False, True), (True, False)]
    (row,) = agreement_report({"Three lines": disagreeing})
    assert row.kappa is not None and row.kappa < KAPPA_TARGET
    assert (row.enough, row.flagged) == (False, False)
    assert row.note == f"3 reviews so far; κ needs at least {MIN_REVIEWS_FOR_KAPPA}"
    assert agreement_report({"x": [(True, False)]})[0].note.startswith("1 review so far")


def test_min_reviews_can_be_lowered():
    disagreeing = [(True, False), (False, True), (True, False)]
    (row,) = agreement_report({"Three lines": disagreeing}, min_reviews=3)
    assert (row.enough, row.flagged) == (True, True)


def test_one_label_only_is_explained_not_flagged():
    (row,) = agreement_report({"Polite": [(True, True)] * MIN_REVIEWS_FOR_KAPPA})
    assert row == CriterionAgreement(
        criterion="Polite",
        n=MIN_REVIEWS_FOR_KAPPA,
        percent_agreement=1.0,
        kappa=None,
        baseline=1.0,
        weights=None,
        enough=True,
        flagged=False,
        note="one label only: κ undefined",
    )


def test_a_criterion_without_reviews():
    (row,) = agreement_report({"Clarity": []})
    assert (row.n, row.kappa, row.percent_agreement, row.baseline) == (0, None, None, None)
    assert row.note == "no reviews yet"


def test_report_keeps_criterion_order():
    names = ["b", "a", "c"]
    assert [r.criterion for r in agreement_report({n: [] for n in names})] == names


@pytest.mark.parametrize("rows", [[(True, 3)], [(0, 1)], [("pass", "fail")], [(6, 5)]])
def test_report_rejects_labels_that_are_neither_pass_fail_nor_scores(rows):
    with pytest.raises(ValueError, match="“Tone”"):
        agreement_report({"Tone": rows})


# --- dimension independence -----------------------------------------------------------------------


def test_correlated_dimensions_reports_pairs_above_the_threshold_strongest_first():
    scores = {
        "correctness": [5, 4, 3, 5, 2, 4, 1],
        "accuracy": [5, 4, 3, 5, 2, 4, 2],  # nearly the same thing
        "helpfulness": [5, 4, 3, 4, 2, 4, 1],
        "tone": [3, 5, 4, 3, 5, 4, 4],
    }
    pairs = correlated_dimensions(scores)
    assert [(a, b) for a, b, _ in pairs] == [
        ("correctness", "accuracy"),
        ("correctness", "helpfulness"),
        ("accuracy", "helpfulness"),
    ]
    rs = [r for _, _, r in pairs]
    assert rs == sorted(rs, reverse=True)
    assert all(r > 0.9 for r in rs)


def test_correlation_at_or_below_the_threshold_is_not_reported():
    x = [1, 2, 3, 4, 5]
    y = [2, 1, 4, 3, 5]  # r = 0.8
    assert correlated_dimensions({"x": x, "y": y}) == []
    ((_, _, r),) = correlated_dimensions({"x": x, "y": y}, threshold=0.7)
    assert r == pytest.approx(0.8)
    assert correlated_dimensions({"x": x, "y": y}, threshold=0.8) == []


def test_strong_negative_correlation_is_not_a_merge_candidate():
    assert correlated_dimensions({"x": [1, 2, 3, 4], "y": [4, 3, 2, 1]}) == []


def test_degenerate_pairs_are_skipped_not_nan():
    assert correlated_dimensions({"x": [1, 2], "y": [1, 2]}) == []  # too few answers
    constant = {"x": [1, 2, 3, 4], "y": [3, 3, 3, 3], "z": [1, 2, 3, 5]}
    assert [(a, b) for a, b, _ in correlated_dimensions(constant)] == [("x", "z")]


def test_correlated_dimensions_needs_one_score_per_answer():
    with pytest.raises(ValueError, match="lengths differ"):
        correlated_dimensions({"x": [1, 2, 3], "y": [1, 2, 3, 4]})


# --- bootstrap intervals on a difference --------------------------------------------------------


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_confusion_kappa_equals_scikit_learn(seed, weights):
    rng = random.Random(200 + seed)
    human = [rng.randint(1, 5) for _ in range(30)]
    judge = [min(5, max(1, h + rng.choice([-2, -1, 0, 0, 1]))) for h in human]
    matrix = np.zeros((1, 5, 5))
    for h, j in zip(human, judge, strict=True):
        matrix[0, h - 1, j - 1] += 1
    expected = cohen_kappa_score(human, judge, weights=weights, labels=[1, 2, 3, 4, 5])
    assert confusion_kappa(matrix, weights)[0] == pytest.approx(expected)


def test_confusion_kappa_is_nan_where_kappa_is_undefined():
    one_label = np.zeros((1, 2, 2))
    one_label[0, 1, 1] = 7
    assert math.isnan(confusion_kappa(one_label, None)[0])


def test_identical_judges_differ_by_exactly_nothing():
    groups = [[(i % 3 == 0, i % 2 == 0, i % 2 == 0)] for i in range(20)]
    assert difference_intervals(groups) == DifferenceIntervals(agreement=(0.0, 0.0), kappa=(0.0, 0.0))


def test_a_clearly_better_judge_gets_an_interval_above_zero_and_a_fixed_seed_repeats_it():
    rng = random.Random(7)
    human = [rng.random() < 0.5 for _ in range(40)]
    groups = [[(h, h if i % 2 else not h, h if i % 10 else not h)] for i, h in enumerate(human)]
    intervals = difference_intervals(groups)
    assert 0 < intervals.agreement[0] < 0.4 < intervals.agreement[1]
    assert intervals.kappa[0] > 0
    assert difference_intervals(groups) == intervals


def test_scores_use_quadratic_kappa_and_labels_of_one_item_move_together():
    # Two reviewers per answer: resampling answers keeps their verdicts together, so an answer
    # on which the judges agree exactly never contributes a difference.
    groups = [[(s, s, s), (s, s, s)] for s in (1, 2, 3, 4, 5)] * 3
    assert difference_intervals(groups).kappa == (0.0, 0.0)


def test_no_interval_without_groups_or_where_kappa_is_mostly_undefined():
    assert difference_intervals([]) == DifferenceIntervals(None, None)
    # Everyone always passes: κ is undefined in every resample, agreement is not.
    groups = [[(True, True, True)] for _ in range(12)]
    assert difference_intervals(groups) == DifferenceIntervals(agreement=(0.0, 0.0), kappa=None)
