import math
import random
from fractions import Fraction

import pytest
from scipy.stats import binomtest

import grading
from grading.selective import KEEP_STEP, agreement_lower_bound, calibrate, min_kept

# --- the bound --------------------------------------------------------------------------------


def _binomial_tail(agreed: int, kept: int, rate: Fraction) -> Fraction:
    """P(Binomial(kept, rate) >= agreed), exactly."""
    return sum(
        (math.comb(kept, k) * rate**k * (1 - rate) ** (kept - k) for k in range(agreed, kept + 1)),
        Fraction(0),
    )


def _bound_clears(agreed: int, kept: int, target: float, risk: float) -> bool:
    """The Clopper–Pearson lower bound is >= target exactly when the one-sided binomial test at
    the target rejects "rate < target" at level risk."""
    return _binomial_tail(agreed, kept, Fraction(target)) <= Fraction(risk)


def test_all_agreeing_bound_is_risk_to_the_one_over_n():
    # With every one of m agreeing, the exact bound solves rate ** m = risk.
    assert agreement_lower_bound(50, 50, 0.05) == pytest.approx(0.05 ** (1 / 50))


@pytest.mark.parametrize(
    ("agreed", "kept", "risk"), [(1, 1, 0.05), (5, 10, 0.1), (900, 1000, 0.05), (3, 3, 0.2)]
)
def test_the_bound_is_scipys_exact_one_sided_interval(agreed, kept, risk):
    exact = binomtest(agreed, kept, alternative="greater").proportion_ci(1 - risk, method="exact")
    assert agreement_lower_bound(agreed, kept, risk) == pytest.approx(exact.low, rel=1e-9)


def test_nobody_agreeing_bounds_the_rate_by_zero():
    assert agreement_lower_bound(0, 20, 0.05) == 0


@pytest.mark.parametrize(("agreed", "kept"), [(95, 100), (27, 29), (9, 10), (180, 200)])
def test_the_bound_is_the_rate_at_which_the_binomial_tail_equals_risk(agreed, kept):
    bound = agreement_lower_bound(agreed, kept, 0.05)
    assert float(_binomial_tail(agreed, kept, Fraction(bound))) == pytest.approx(0.05, rel=1e-6)


@pytest.mark.parametrize(("target", "risk", "fewest"), [(0.9, 0.05, 29), (0.8, 0.1, 11), (0.95, 0.05, 59)])
def test_min_kept_is_the_fewest_all_agreeing_verdicts_that_reach_the_target(target, risk, fewest):
    # 0.05 ** (1/29) = 0.9018 >= 0.9 > 0.05 ** (1/28) = 0.8985
    assert min_kept(target, risk) == fewest
    assert agreement_lower_bound(fewest, fewest, risk) >= target
    assert agreement_lower_bound(fewest - 1, fewest - 1, risk) < target


# --- calibrate on known answers ---------------------------------------------------------------


def test_every_verdict_agreeing_and_enough_of_them_returns_the_lowest_confidence():
    confidences = [0.4 + i / 100 for i in range(60)]
    assert calibrate(confidences, [True] * 60, target=0.9, risk=0.05) == 0.4


def test_too_few_verdicts_promise_nothing_even_if_all_agree():
    assert calibrate([1.0] * 28, [True] * 28, target=0.9, risk=0.05) is None
    assert calibrate([1.0] * 29, [True] * 29, target=0.9, risk=0.05) == 1.0


def test_every_verdict_disagreeing_promises_nothing():
    confidences = [i / 200 for i in range(200)]
    assert calibrate(confidences, [False] * 200, target=0.6, risk=0.1) is None


def test_no_reviews_promise_nothing():
    assert calibrate([], [], target=0.9, risk=0.05) is None


def test_monotone_confidence_stops_where_disagreement_starts():
    # Confidences 0.01 … 1.00; people agree exactly from 0.50 up (51 verdicts). Candidates keep
    # 30, 35, …, 50 verdicts (all agree; fewer than 29 are skipped), then 55 (thresh. 0.46) keeps
    # 51 agreeing of 55, bound 0.818 < 0.9: testing stops and λ is the one keeping 50, 0.51.
    confidences = [i / 100 for i in range(1, 101)]
    agreed = [confidence >= 0.5 for confidence in confidences]
    assert calibrate(confidences, agreed, target=0.9, risk=0.05) == 0.51


def test_testing_stops_at_the_first_failure_even_if_a_lower_threshold_would_pass():
    # The 40 most confident verdicts agree only 30 times; below them 400 agree. Keeping all would
    # clear 0.9 (430 of 440), but the sequence never gets past its first failing threshold.
    confidences = [1.0 - i / 1000 for i in range(440)]
    agreed = [i % 4 != 0 for i in range(40)] + [True] * 400
    assert agreement_lower_bound(430, 440, 0.05) >= 0.9
    assert calibrate(confidences, agreed, target=0.9, risk=0.05) is None


def test_tied_confidences_keep_every_verdict_at_the_threshold():
    # Three samples give confidences 1 or 2/3 only: the candidates are those two values.
    confidences = [1.0] * 40 + [2 / 3] * 60
    agreed = [True] * 40 + [True] * 50 + [False] * 10
    assert calibrate(confidences, agreed, target=0.8, risk=0.05) == pytest.approx(2 / 3)
    assert calibrate(confidences, agreed, target=0.9, risk=0.05) == 1.0


def test_the_answer_does_not_depend_on_the_order_of_the_reviews():
    rng = random.Random(7)
    pairs = [(c, rng.random() < 0.75 + 0.25 * c) for c in (rng.random() for _ in range(300))]
    shuffled = rng.sample(pairs, len(pairs))
    first = calibrate([c for c, _ in pairs], [a for _, a in pairs], 0.85, 0.05)
    assert first is not None
    assert calibrate([c for c, _ in shuffled], [a for _, a in shuffled], 0.85, 0.05) == first


@pytest.mark.parametrize(
    ("confidences", "agreed", "target", "risk"),
    [
        ([0.5], [True, False], 0.9, 0.05),
        ([math.nan], [True], 0.9, 0.05),
        ([0.5], [True], 1.0, 0.05),
        ([0.5], [True], 0.9, 0.0),
        ([0.5], [True], 0.0, 0.05),
    ],
)
def test_bad_input_is_refused_with_a_reason(confidences, agreed, target, risk):
    with pytest.raises(ValueError, match=r"\w"):
        calibrate(confidences, agreed, target, risk)


def test_calibrate_is_public():
    assert grading.calibrate is calibrate


# --- calibrate on random data against a brute-force check -------------------------------------


def _brute_force(confidences: list[float], agreed: list[bool], target: float, risk: float) -> float | None:
    """The issue's procedure written the long way: for each share 5 %, 10 %, …, the highest
    confidence keeping at least that share; every verdict at or above it kept; skip those that
    could not reach the target if all agreed; stop at the first the exact binomial test keeps."""
    n = len(confidences)
    candidates: list[float] = []
    for step in range(1, round(1 / KEEP_STEP) + 1):
        share = Fraction(step, round(1 / KEEP_STEP))
        eligible = [c for c in confidences if sum(other >= c for other in confidences) >= share * n]
        if eligible and max(eligible) not in candidates:
            candidates.append(max(eligible))
    threshold = None
    for candidate in sorted(candidates, reverse=True):
        kept = [a for c, a in zip(confidences, agreed, strict=True) if c >= candidate]
        if not _bound_clears(len(kept), len(kept), target, risk):
            continue
        if not _bound_clears(sum(kept), len(kept), target, risk):
            break
        threshold = candidate
    return threshold


def _random_case(seed: int) -> tuple[list[float], list[bool], float, float]:
    """Reviews of a grader of random skill whose agreement grows with its confidence."""
    rng = random.Random(seed)
    n = rng.choice([10, 30, 60, 120, 200])
    levels = rng.choice([3, 5, 11, 1000])  # few distinct confidences (samples) or nearly continuous
    confidences = [rng.randrange(levels) / (levels - 1) for _ in range(n)]
    skill = rng.uniform(0.5, 1.0)
    agreed = [rng.random() < skill * (0.6 + 0.4 * c) for c in confidences]
    return confidences, agreed, rng.choice([0.6, 0.75, 0.8, 0.9]), rng.choice([0.05, 0.1, 0.2])


RANDOM_SEEDS = range(40)


@pytest.mark.parametrize("seed", RANDOM_SEEDS)
def test_random_data_matches_a_brute_force_check_of_the_bound(seed):
    confidences, agreed, target, risk = _random_case(seed)
    expected = _brute_force(confidences, agreed, target, risk)
    assert calibrate(confidences, agreed, target, risk) == expected
    if expected is not None:
        kept = [a for c, a in zip(confidences, agreed, strict=True) if c >= expected]
        assert _bound_clears(sum(kept), len(kept), target, risk)


def test_the_random_cases_are_decided_both_ways():
    # The random cases above must exercise both answers, or they check little.
    answers = {calibrate(*_random_case(seed)) is None for seed in RANDOM_SEEDS}
    assert answers == {True, False}


def test_thresholds_it_promises_hold_on_fresh_data_at_least_one_minus_risk_of_the_time():
    # A grader whose agreement rate at confidence c is 0.7 + 0.3 c: the true rate above λ is known
    # in closed form for confidences uniform on [0, 1]: 0.7 + 0.3 (1 + λ) / 2.
    rng = random.Random(2026)
    target, risk, promised, violated = 0.88, 0.1, 0, 0
    for _ in range(300):
        confidences = [rng.random() for _ in range(200)]
        agreed = [rng.random() < 0.7 + 0.3 * c for c in confidences]
        threshold = calibrate(confidences, agreed, target, risk)
        if threshold is not None:
            promised += 1
            violated += 0.7 + 0.3 * (1 + threshold) / 2 < target
    assert promised > 150
    assert violated / 300 <= risk
