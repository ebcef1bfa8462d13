"""The shadow grader's pieces: which live iterations it grades, and how its figures are reported."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.db.reviews import ReviewRow
from bot.db.shadow import ShadowTally, ShadowVerdictRow
from bot.review.verdicts import CANNOT_TELL
from bot.shadow.grader import is_shadowed
from bot.shadow.report import ShadowFigures, agreement_words, flip_words, shadow_criteria, shadow_lines
from bot.vocabulary.verdicts import Verdict

NOW = datetime(2026, 12, 1, tzinfo=UTC)


def test_the_share_shadowed_is_about_the_share_asked_the_same_every_time_and_not_the_audits_choice():
    keys = [(f"run-{n // 3}", n % 3) for n in range(10_000)]
    chosen = [key for key in keys if is_shadowed(*key, 0.1)]
    assert 900 < len(chosen) < 1100
    assert chosen == [key for key in keys if is_shadowed(*key, 0.1)]  # reproducible
    assert all(is_shadowed(*key, 1) for key in keys[:1000])
    assert not any(is_shadowed(*key, 0) for key in keys[:1000])
    assert set(chosen) <= {key for key in keys if is_shadowed(*key, 0.5)}  # a larger share adds some


def verdict(
    run: int, criterion: str, shadow: str, live: str | None, model: str = "shadow-1"
) -> ShadowVerdictRow:
    return ShadowVerdictRow(f"g{run}", 0, criterion, shadow, live, model, NOW, "T1", "C1")


def review(run: int, criterion: str, grader: Verdict, person: Verdict, who: str = "UEDITOR") -> ReviewRow:
    return ReviewRow("T1", "C1", "1.0", f"g{run}", 0, criterion, grader, person, "", who, NOW, editor=True)


def test_agreement_is_on_the_reviewed_iterations_both_judged_beside_the_live_graders_and_flips_on_all():
    # 12 runs: the live grader passes "Is polite" every time, the shadow fails it in runs 0-3; people
    # said fail in runs 0-5 and pass after, so the shadow agrees on 10 of 12 and the live grader on 6.
    rows = [verdict(run, "Is polite", "fail" if run < 4 else "pass", "pass") for run in range(12)]
    rows.append(verdict(12, "Is polite", CANNOT_TELL, "pass"))  # not judged by the shadow: left out
    rows.append(verdict(13, "Is polite", "pass", None))  # the live grader gave none: left out
    reviews = [review(run, "Is polite", "pass", "fail" if run < 6 else "pass") for run in range(12)]

    (polite,) = shadow_criteria(rows, reviews)

    assert (polite.model, polite.criterion, polite.compared, polite.flips) == ("shadow-1", "Is polite", 12, 4)
    assert polite.shadow is not None and polite.live is not None
    assert (polite.shadow.n, polite.live.n) == (12, 12)
    assert round(polite.shadow.percent_agreement or 0, 3) == round(10 / 12, 3)
    assert polite.live.percent_agreement == 0.5
    assert polite.shadow.agreement_interval is not None and polite.live.agreement_interval is not None
    words = agreement_words(polite)
    assert words.startswith("with people: shadow 83% (") and "· live 50% (" in words
    assert words.endswith("on 12 trusted reviews from 12 runs")
    flips = flip_words(polite)
    assert flips.startswith("flips against live: 4 of 12 iterations: 33% (95% CI ")


def test_under_ten_reviews_or_iterations_only_the_counts_are_said():
    rows = [verdict(run, "Cites a source", "pass", "fail" if run == 0 else "pass") for run in range(3)]
    reviews = [review(0, "Cites a source", "fail", "pass"), review(1, "cites a source", "pass", "pass")]

    (cites,) = shadow_criteria(rows, reviews)

    assert agreement_words(cites) == "with people: 2 trusted reviews from 2 runs: too few to read (under 10)"
    assert flip_words(cites) == "flips against live: 3 iterations compared: too few to read (under 10)"
    assert cites.flip_share is None and cites.flip_interval is None


def test_a_criterion_nobody_reviewed_says_so_and_each_shadow_model_has_its_own_line():
    rows = [verdict(0, "Is polite", "pass", "pass", "old-model"), verdict(1, "Is polite", "pass", "pass")]

    old, new = shadow_criteria(rows, [])

    assert (old.model, new.model) == ("old-model", "shadow-1")
    assert agreement_words(old) == "with people: no trusted review of its iterations yet"


def test_a_reviewers_later_verdict_replaces_their_earlier_one():
    rows = [verdict(0, "Is polite", "pass", "fail")]
    reviews = [review(0, "Is polite", "fail", "fail"), review(0, "Is polite", "fail", "pass")]

    (polite,) = shadow_criteria(rows, reviews)

    assert polite.shadow is not None and polite.shadow.n == 1 and polite.shadow.percent_agreement == 1


def test_the_report_says_nothing_without_shadow_grades_and_its_cost_and_failures_with_them():
    assert shadow_lines(ShadowFigures(ShadowTally(0, 0, 0, 0.0, 0))) == []

    figures = ShadowFigures(
        ShadowTally(3, 1, 1200, 0.0123, 0), shadow_criteria([verdict(0, "Is polite", "pass", "pass")], [])
    )
    lines = shadow_lines(figures)

    assert lines[0] == (
        "Shadow grader: 3 live iterations graded in the shadow (1,200 tokens, $0.0123); "
        "1 failed and are left out."
    )
    assert lines[1].startswith("  Is polite (shadow-1): with people: no trusted review")
    assert "never posted and never acts" in lines[-1]
