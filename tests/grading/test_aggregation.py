from statistics import mean

import pytest

from grading.aggregation import Aggregate, aggregate, weakest_first
from grading.rubric import Rubric, parse_rubric

SEED = """\
dimensions:
  - {name: Correctness, weight: 0.5, fail_below: 3}
  - {name: Completeness, weight: 0.2}
  - {name: Clarity, weight: 0.15}
  - {name: Tone, weight: 0.15}
"""


def rubric(aggregation: str = "weighted", pass_score: float = 4) -> Rubric:
    return parse_rubric(f"{SEED}aggregation: {aggregation}\npass_score: {pass_score}\n")


def scores(correctness: int, completeness: int, clarity: int, tone: int) -> dict[str, int]:
    return {"Correctness": correctness, "Completeness": completeness, "Clarity": clarity, "Tone": tone}


# --- answers that one strong dimension must not carry -------------------------------------------


def test_an_answer_of_all_fives_passes():
    assert aggregate(rubric(), scores(5, 5, 5, 5)) == Aggregate(5.0, "PASS", ())


def test_false_information_fails_although_the_plain_mean_is_4():
    b = scores(1, 5, 5, 5)
    assert mean(b.values()) == 4.0
    result = aggregate(rubric(), b)
    assert result.verdict == "FAIL"
    assert result.below_floor == ("Correctness",)
    assert result.score == 3.0


@pytest.mark.parametrize("aggregation", ["weighted", "min", "per_dimension"])
def test_the_floor_fails_the_answer_whatever_the_aggregation(aggregation):
    assert aggregate(rubric(aggregation), scores(2, 5, 5, 5)).verdict == "FAIL"


def test_a_score_at_the_floor_is_not_below_it():
    result = aggregate(rubric(), scores(3, 5, 5, 5))
    assert result.below_floor == ()
    assert result == Aggregate(4.0, "PASS", ())


# --- weighted -------------------------------------------------------------------------------------


def test_weighted_mean_under_the_pass_score_is_review():
    result = aggregate(rubric(), scores(4, 3, 3, 3))  # .5*4 + .5*3 = 3.5
    assert result == Aggregate(3.5, "REVIEW", ())


def test_weighted_score_is_rounded_to_two_decimals():
    assert aggregate(rubric(), scores(4, 4, 5, 4)).score == 4.15


def test_a_mean_shown_as_4_passes_despite_float_noise():
    equal = parse_rubric("dimensions:\n  - name: A\n  - name: B\n  - name: C\n")
    assert sum((1 / 3) * s for s in (2, 5, 5)) < 4  # the raw float falls just short
    assert aggregate(equal, {"A": 2, "B": 5, "C": 5}) == Aggregate(4.0, "PASS", ())


def test_pass_score_comes_from_the_rubric():
    almost = scores(5, 4, 4, 3)  # 4.35
    assert aggregate(rubric(pass_score=4), almost).verdict == "PASS"
    assert aggregate(rubric(pass_score=4.5), almost).verdict == "REVIEW"


# --- min (weakest link) -----------------------------------------------------------------------


def test_min_takes_the_weakest_dimension():
    assert aggregate(rubric("min"), scores(5, 5, 5, 3)) == Aggregate(3.0, "REVIEW", ())
    assert aggregate(rubric("min"), scores(5, 4, 5, 4)) == Aggregate(4.0, "PASS", ())


def test_min_is_not_fooled_by_a_high_weighted_mean():
    strong_but_rude = scores(5, 5, 5, 2)  # weighted mean 4.55
    assert aggregate(rubric("weighted"), strong_but_rude).verdict == "PASS"
    assert aggregate(rubric("min"), strong_but_rude).verdict == "REVIEW"


# --- per dimension ----------------------------------------------------------------------------


def test_per_dimension_passes_only_when_every_dimension_reaches_the_pass_score():
    assert aggregate(rubric("per_dimension"), scores(4, 4, 5, 4)) == Aggregate(4.15, "PASS", ())
    result = aggregate(rubric("per_dimension"), scores(5, 5, 5, 3))
    assert result == Aggregate(4.7, "REVIEW", ())  # the score is the weighted mean, for information


# --- input checking -----------------------------------------------------------------------------


def test_grader_spellings_of_dimension_names_are_accepted():
    result = aggregate(rubric(), {"correctness.": 1, " COMPLETENESS ": 5, "Clarity": 5, "tone!": 5})
    assert result.below_floor == ("Correctness",)


def test_a_missing_dimension_is_named():
    with pytest.raises(ValueError, match="“Tone”"):
        aggregate(rubric(), {"Correctness": 5, "Completeness": 5, "Clarity": 5})


def test_an_unknown_dimension_is_named():
    with pytest.raises(ValueError, match="“Empathy”"):
        aggregate(rubric(), {**scores(5, 5, 5, 5), "Empathy": 5})


def test_the_same_dimension_scored_twice_is_an_error():
    with pytest.raises(ValueError, match="twice"):
        aggregate(rubric(), {**scores(5, 5, 5, 5), "tone.": 1})


@pytest.mark.parametrize("bad", [0, 6, 3.5, True, "5", None])
def test_scores_must_be_whole_numbers_from_1_to_5(bad):
    with pytest.raises(ValueError, match="“Clarity”"):
        aggregate(rubric(), {**scores(5, 5, 5, 5), "Clarity": bad})


def test_a_list_rubric_cannot_be_aggregated():
    with pytest.raises(ValueError, match="pass/fail"):
        aggregate(parse_rubric("- a\n- b"), {"a": 5, "b": 5})


# --- feedback order -----------------------------------------------------------------------------


def test_weakest_first_orders_by_score_then_heavier_weight():
    order = weakest_first(rubric(), scores(3, 3, 5, 2))
    assert order == ["Tone", "Correctness", "Completeness", "Clarity"]


def test_weakest_first_keeps_rubric_order_on_full_ties():
    assert weakest_first(rubric(), scores(4, 4, 4, 4)) == ["Correctness", "Completeness", "Clarity", "Tone"]
    assert weakest_first(rubric(), scores(5, 5, 4, 4)) == ["Clarity", "Tone", "Correctness", "Completeness"]
