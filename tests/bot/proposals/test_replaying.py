"""A proposal's replay figures on data whose answer is known: the difference of agreement and its
bootstrap 95 % interval (whole iterations resampled), nothing shown under the minimum count, and the
candidate each kind of proposal grades a case with."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from bot.agreement.comparison import compare
from bot.agreement.replay import Case
from bot.db.proposals import Proposal
from bot.proposals.messages import criterion_line
from bot.proposals.replaying import candidate_of, changed_by, summary_line
from bot.vocabulary.provenance import read_provenance
from tests.bot.agreement.test_comparison import case

NOW = datetime.now(UTC)
POLITE = "Is polite"


def replayed(cases: int, flipped: int, reviewers: tuple[str, ...] = ("U1",)):
    """`cases` iterations the grader passed and the team agreed with; the candidate fails the first
    `flipped` of them."""
    reviewed = [case(i, [(POLITE, "pass", "pass")], reviewers) for i in range(cases)]
    after = {c.key: {POLITE: "fail" if i < flipped else "pass"} for i, c in enumerate(reviewed)}
    before = {c.key: c.original_verdicts for c in reviewed}
    return compare(reviewed, before, after, labels=("team", "proposal"), planned=cases)


def test_every_verdict_flipped_away_from_the_team_is_a_certain_drop_of_one():
    comparison = replayed(20, 20)
    assert comparison.criteria[0].agreement_interval == (-1.0, -1.0)
    assert summary_line(comparison) == (
        "replayed on 20 reviewed iterations: agreement 1.00→0.00 (−1.00, 95 % −1.00…−1.00) on 20 verdicts; "
        "20 flips"
    )


def test_nothing_flipped_is_no_change_for_certain():
    comparison = replayed(12, 0)
    assert criterion_line(comparison.criteria[0]) == (
        f"*{POLITE}* (pass/fail) — agreement 1.00→1.00 (+0.00, 95 % +0.00…+0.00) on 12 verdicts · "
        "_one label only: κ undefined_"
    )


def test_half_flipped_has_the_interval_of_a_mean_of_forty_coin_flips():
    """Each iteration's difference is −1 or 0, half each: the bootstrap interval of their mean is
    close to the normal one, −0.5 ± 1.96·√(0.25/40) ≈ ±0.155."""
    comparison = replayed(40, 20)
    row = comparison.criteria[0]
    assert row.agreement_difference == pytest.approx(-0.5)
    low, high = row.agreement_interval
    assert low == pytest.approx(-0.5 - 0.155, abs=0.04) and high == pytest.approx(-0.5 + 0.155, abs=0.04)


def test_more_reviewers_of_the_same_iterations_do_not_narrow_the_interval():
    """Whole iterations are resampled: two reviewers agreeing on each add verdicts, not evidence."""
    one = replayed(30, 9).criteria[0]
    two = replayed(30, 9, reviewers=("U1", "U2")).criteria[0]
    assert two.n == 2 * one.n
    assert two.agreement_interval == one.agreement_interval


def test_under_the_minimum_count_only_the_count_is_shown():
    comparison = replayed(9, 3)
    assert (
        summary_line(comparison) == "replayed on 9 reviewed iterations: 9 verdicts, too few to read; 3 flips"
    )
    assert criterion_line(comparison.criteria[0]) == (
        f"*{POLITE}* (pass/fail) — 9 verdicts: too few to read; figures need 10"
    )


def proposal(kind, candidate) -> Proposal:
    return Proposal(1, "T1", "C1", kind, candidate, "1", "U1", "pending", None, None, None, NOW)


def test_each_proposal_grades_a_case_with_its_own_candidate():
    plain = case(1, [(POLITE, "pass", "pass")])
    shown = [{"criterion": POLITE, "id": "7"}, {"criterion": POLITE, "id": "8"}]
    reviewed = Case(replace(plain.record, evaluation={"calibration": shown}), plain.reviews)
    assert candidate_of(proposal("rubric", "- Is kind"))(reviewed).record.rubric_text == "- Is kind"
    dropped = candidate_of(proposal("calibration_drop", "7"))(reviewed).record.evaluation["calibration"]
    assert dropped == [{"criterion": POLITE, "id": "8"}]
    assert candidate_of(proposal("grader_model", "openai:gpt-4.1"))(reviewed) == reviewed


def test_a_new_channel_rubric_is_replayed_only_on_iterations_graded_with_the_channels_rubric():
    def graded_with(version: str) -> Case:
        plain = case(1, [(POLITE, "pass", "pass")])
        shown = read_provenance({"rubric_version": version, "grader_model": "grader-1"})
        return Case(replace(plain.record, provenance=shown), plain.reviews)

    channels, threads_own = graded_with("v3"), graded_with("#a1b2c3")
    new_rubric, drop = proposal("rubric", "- Is kind"), proposal("calibration_drop", "7")
    assert changed_by(new_rubric, channels)
    assert not changed_by(new_rubric, threads_own)  # the thread keeps its own rubric
    assert changed_by(drop, threads_own)  # the examples are the channel's whatever the rubric
