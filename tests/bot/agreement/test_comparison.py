"""The replay comparison's numbers and wording, from hand-made cases (no database, no model)."""

from __future__ import annotations

import random
from datetime import UTC, datetime

import pytest
from sklearn.metrics import cohen_kappa_score

from bot.agreement.comparison import chart_figure, chart_png, compare, comparison_blocks, comparison_table
from bot.agreement.presentation import shown_kappa
from bot.agreement.replay import Case
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from tests.bot.agreement import chart_reading as chart
from tests.bot.agreement.chart_reading import PNG_SIGNATURE

NOW = datetime.now(UTC)
SEED = 11


def case(i: int, rows: list[tuple[str, str, str]], reviewers: tuple[str, ...] = ("U1",)) -> Case:
    """A reviewed iteration whose (criterion, grader verdict, team verdict) rows each reviewer gave."""
    record = EvaluationRecord(f"run-{i}", 0, "T1", "C1", f"{i}.0", f"{i}.1", {}, "rubric", NOW)
    reviews = tuple(
        ReviewRow("T1", "C1", f"{i}.0", f"run-{i}", 0, name, grader, team, "", reviewer, NOW)
        for reviewer in reviewers
        for name, grader, team in rows
    )
    return Case(record, reviews)


def scored_cases() -> tuple[list[Case], dict, list[int], list[int], list[int]]:
    rng = random.Random(SEED)
    team = [rng.randint(1, 5) for _ in range(30)]
    before = [min(5, max(1, t + rng.choice([-2, -1, 0, 1]))) for t in team]
    after = [min(5, max(1, t + rng.choice([-1, 0, 0, 0]))) for t in team]
    cases = [
        case(i, [("Clarity", str(b), str(t)), ("Cites a source", "pass", "pass" if t > 2 else "fail")])
        for i, (t, b) in enumerate(zip(team, before, strict=True))
    ]
    candidate = {
        c.key: {"Clarity": str(a), "cites a source.": "pass" if t > 2 else "fail"}
        for c, t, a in zip(cases, team, after, strict=True)
    }
    return cases, candidate, team, before, after


def test_scored_dimensions_get_quadratic_kappa_as_scikit_learn_computes_it():
    cases, candidate, team, before, after = scored_cases()
    original = {c.key: c.original_verdicts for c in cases}
    result = compare(cases, original, candidate, labels=("original", "candidate"), planned=len(cases))

    clarity = next(r for r in result.criteria if r.criterion == "Clarity")
    quadratic = {"weights": "quadratic", "labels": [1, 2, 3, 4, 5]}
    assert clarity.kind == "1–5" and clarity.n == 30
    assert clarity.before.kappa == pytest.approx(cohen_kappa_score(team, before, **quadratic))
    assert clarity.after.kappa == pytest.approx(cohen_kappa_score(team, after, **quadratic))
    low, high = clarity.kappa_interval
    assert low <= clarity.kappa_difference <= high
    # Criterion names match however the candidate spelled them; the two kinds are pooled apart.
    assert next(r for r in result.criteria if r.criterion == "Cites a source").n == 30
    assert result.overall == []  # one criterion of each kind: their own rows are the pooled ones
    cites_flips = [f for f in result.flips if f.criterion == "Cites a source"]
    assert len(cites_flips) == sum(t <= 2 for t in team) and {f.effect for f in cites_flips} == {"fixed"}


def test_every_reviewer_counts_and_cases_one_side_lacks_are_left_out():
    cases = [case(i, [("Is polite", "pass", "fail" if i % 2 else "pass")], ("U1", "U2")) for i in range(12)]
    original = {c.key: c.original_verdicts for c in cases}
    candidate = {c.key: {"Is polite": "fail" if i % 2 else "pass"} for i, c in enumerate(cases[:10])}
    result = compare(cases, original, candidate, labels=("original", "candidate"), planned=12)

    (polite,) = result.criteria
    assert result.compared == 10 and polite.n == 20  # two reviewers on each of the 10 both judged
    assert polite.before.percent_agreement == 0.5 and polite.after.percent_agreement == 1.0
    assert result.overall == []  # one criterion: its row is the overall
    assert len(result.flips) == 5 and {f.effect for f in result.flips} == {"fixed"}
    assert {f.team for f in result.flips} == {("fail", "fail")}


def test_too_few_verdicts_show_no_kappa_or_interval_and_say_why():
    cases = [case(i, [("Is polite", "pass", "fail" if i else "pass")]) for i in range(4)]
    original = {c.key: c.original_verdicts for c in cases}
    candidate = {c.key: {"Is polite": "fail"} for c in cases}
    result = compare(cases, original, candidate, labels=("off", "loo"), planned=4)

    (polite,) = result.criteria
    assert polite.kappa_difference is None and polite.kappa_interval is None
    assert polite.agreement_interval is None and polite.agreement_difference == pytest.approx(0.5)
    table = comparison_table(result)
    assert "Replay: loo vs off" in table and "+50 pts" in table and "needs at least 10" not in table
    message = comparison_blocks(result, title="Replay", asked_by="U7", channel="C1")
    assert "Asked by <@U7>" in str(message["blocks"]) and "4 reviews so far; κ needs at least 10" in str(
        message["blocks"]
    )
    assert chart_png(result).startswith(PNG_SIGNATURE)
    kappa, _ = chart.panels(chart_figure(result))  # no κ on either side: two bands saying why
    assert [bar.hatched for bar in chart.bars(kappa)] == [True, True]
    assert chart.notes(kappa) == [polite.before.note, polite.after.note]
    assert "κ needs at least 10" in polite.before.note


def test_the_chart_shows_both_graders_kappa_and_agreement_per_criterion_side_by_side():
    cases, candidate, *_ = scored_cases()
    original = {c.key: c.original_verdicts for c in cases}
    result = compare(cases, original, candidate, labels=("original", "candidate"), planned=len(cases))
    rows = [*result.criteria, *result.overall]
    figure = chart_figure(result)

    assert chart.title(figure) == f"Replay: candidate vs original — {result.summary()}"
    kappa, agreement = chart.panels(figure)
    assert chart.row_labels(kappa) == [row.criterion for row in rows] == ["Clarity", "Cites a source"]
    positions = [(index - 0.2, index + 0.2) for index in range(len(rows))]  # before above after
    shown = [
        (round(y, 6), None if value is None else pytest.approx(value))
        for row, ys in zip(rows, positions, strict=True)
        for y, value in zip(ys, (shown_kappa(row.before), shown_kappa(row.after)), strict=True)
    ]
    assert [(bar.row, None if bar.hatched else bar.width) for bar in chart.bars(kappa)] == shown
    assert chart.notes(kappa) == []  # every κ is shown: no band
    agreements = [
        (round(y, 6), pytest.approx(value))
        for row, ys in zip(rows, positions, strict=True)
        for y, value in zip(ys, (row.before.percent_agreement, row.after.percent_agreement), strict=True)
    ]
    assert [(bar.row, bar.width) for bar in chart.bars(agreement)] == agreements
    assert chart.value_labels(agreement) == [f"{value.expected:.0%}" for _, value in agreements]
    assert sorted(chart.legend_labels(figure)) == ["candidate", "original", "κ target 0.6"]
