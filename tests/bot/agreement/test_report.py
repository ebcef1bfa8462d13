"""The agreement report: its numbers for seeded reviews, its wording, Slack blocks, table and chart."""

from __future__ import annotations

import io
import random
from datetime import UTC, datetime

import pytest
from matplotlib.colors import to_rgba
from PIL import Image
from sklearn.metrics import cohen_kappa_score

from bot.agreement.report import build_report, report_blocks, report_table
from bot.agreement.report_chart import AGREEMENT_COLOURS, KAPPA_COLOURS, chart_figure, render_chart
from bot.db.reviews import ReviewRow
from grading.rubric import MAX_CRITERIA
from tests.bot.agreement import chart_reading as chart
from tests.bot.agreement.chart_reading import PNG_SIGNATURE
from tests.bot.slack.block_assertions import assert_within_slack_limits, texts

NOW = datetime.now(UTC)


def review(criterion, grader, reviewer_verdict, *, reviewer="U1", run="run", iteration=0):
    return ReviewRow(
        "T1", "C1", "1.0", run, iteration, criterion, grader, reviewer_verdict, "", reviewer, NOW
    )


def reviews_of(criterion, pairs, reviewer="U1"):
    """One review per (grader, reviewer) verdict pair, each of a different iteration."""
    return [
        review(criterion, grader, human, reviewer=reviewer, run=f"run-{i}")
        for i, (grader, human) in enumerate(pairs)
    ]


def scored(run, **scores):
    return {
        "grading_run_id": run,
        "iteration": 0,
        "kind": "scored",
        "criteria": [{"name": n, "passed": s >= 4, "gap": "", "score": s} for n, s in scores.items()],
    }


# Ten pass/fail reviews, hand-checkable: both pass 4, both fail 3, reviewer pass/grader fail 2,
# reviewer fail/grader pass 1. p_o = .7; p_e = .6 * .5 + .4 * .5 = .5; κ = .2 / .5 = .4.
# The reviewers said pass 6 times of 10, so always saying pass would agree 60% of the time.
TEN_PASS_FAIL = [("pass", "pass")] * 4 + [("fail", "fail")] * 3 + [("fail", "pass")] * 2 + [("pass", "fail")]


def only(report, name):
    (found,) = [c.agreement for c in report.criteria if c.name == name]
    return found


def test_pass_fail_numbers_checked_by_hand():
    report = build_report(reviews_of("Cites a source", TEN_PASS_FAIL), [], days=30)
    criterion = only(report, "Cites a source")
    assert criterion.n == 10
    assert criterion.percent_agreement == pytest.approx(0.7)
    assert criterion.baseline == pytest.approx(0.6)
    assert criterion.kappa == pytest.approx(0.4)
    assert criterion.weights is None
    # Ten runs say little: κ's 95% interval (runs resampled) reaches above the 0.6 bar, so no flag.
    assert criterion.clusters == 10
    low, high = criterion.kappa_interval
    assert low < 0.4 < 0.6 < high
    assert criterion.agreement_interval[0] < 0.7 < criterion.agreement_interval[1]
    assert not criterion.flagged


def test_scored_dimension_uses_quadratic_kappa_as_scikit_learn_does():
    rng = random.Random(7)
    grader = [rng.randint(1, 5) for _ in range(20)]
    human = [min(5, max(1, g + rng.choice([-1, 0, 0, 1]))) for g in grader]
    rows = reviews_of("Clarity", [(str(g), str(h)) for g, h in zip(grader, human, strict=True)])
    criterion = only(build_report(rows, [], days=None), "Clarity")
    expected = cohen_kappa_score(human, grader, weights="quadratic", labels=[1, 2, 3, 4, 5])
    assert criterion.kappa == pytest.approx(expected)
    assert criterion.weights == "quadratic"
    assert criterion.n == 20


def test_counts_review_submissions_and_reviewers():
    rows = [
        review("A", "pass", "pass", reviewer="U1", run="r1"),
        review("B", "fail", "pass", reviewer="U1", run="r1"),
        review("A", "pass", "fail", reviewer="U2", run="r1"),
        review("A", "pass", "pass", reviewer="U2", run="r2"),
    ]
    report = build_report(rows, [], days=7)
    assert (report.reviews, report.reviewers) == (3, 2)
    assert only(report, "A").n == 3
    assert "3 reviews by 2 reviewers" in report_table(report)
    assert report.period == "last 7 days"


def test_too_few_reviews_is_said_plainly_without_a_kappa():
    rows = reviews_of("Tone", [("pass", "fail"), ("fail", "pass"), ("pass", "pass")])
    report = build_report(rows, [], days=None)
    criterion = only(report, "Tone")
    assert not criterion.flagged
    table = report_table(report)
    line = next(line for line in table.splitlines() if line.startswith("Tone"))
    assert "3 reviews so far; κ needs at least 10" in line
    assert "0." not in line.split("pass/fail")[1].split("3 reviews")[0]  # no κ number
    blocks = report_blocks(report, channel="C1")
    body = "\n".join(texts(blocks))
    assert "3 reviews so far; κ needs at least 10" in body
    assert "κ -" not in body and "*κ" not in body


def test_one_label_only_has_no_kappa_but_full_agreement():
    rows = reviews_of("Polite", [("pass", "pass")] * 12)
    report = build_report(rows, [], days=None)
    criterion = only(report, "Polite")
    assert criterion.kappa is None and criterion.percent_agreement == 1.0 and criterion.baseline == 1.0
    assert not criterion.flagged
    assert "one label only" in report_table(report)
    assert "one label only" in "\n".join(texts(report_blocks(report, channel="C1")))


def test_low_kappa_is_flagged_once_its_interval_lies_under_the_bar_and_a_good_one_is_not():
    rows = reviews_of("Cites a source", TEN_PASS_FAIL * 12) + reviews_of(
        "States the deadline", [("pass", "pass")] * 6 + [("fail", "fail")] * 4
    )
    report = build_report(rows, [], days=None)
    assert [c.name for c in report.flagged] == ["Cites a source"]
    assert only(report, "Cites a source").kappa_interval[1] < 0.6  # 120 runs at κ 0.4
    table = report_table(report)
    assert "Flagged: Cites a source" in table
    assert "rewrite its anchors" in table
    body = "\n".join(texts(report_blocks(report, channel="C1")))
    assert "⚠️ *Cites a source*" in body
    assert "✅ *States the deadline*" in body
    assert "rewrite its anchors" in body
    assert "*κ 1.00 (1.00–1.00)*" in body and "*κ 0.40 (0.24–0.55)*" in body


def test_long_names_are_shortened_in_the_table():
    long_word = "Supercalifragilistic" * 5
    rows = [review(long_word, "pass", "pass"), review("Short\nand  spaced", "pass", "pass")]
    lines = report_table(build_report(rows, [], days=None)).splitlines()
    assert lines[3].startswith("Supercalifragilistic" + "Supercalifragilisti…  pass/fail")
    assert lines[4].startswith("Short and spaced  ")


def test_names_group_ignoring_case_and_kinds_stay_apart():
    rows = [
        review("Clarity", "pass", "pass", run="r1"),
        review("clarity.", "fail", "pass", run="r2"),
        review("Clarity", "3", "4", run="r3"),
    ]
    report = build_report(rows, [], days=None)
    assert [(c.name, c.agreement.n) for c in report.criteria] == [
        ("Clarity (pass/fail)", 2),
        ("Clarity (1–5)", 1),
    ]


def test_dimensions_whose_grader_scores_correlate_are_flagged():
    rng = random.Random(3)
    evaluations = []
    for i in range(12):
        correctness = rng.randint(1, 5)
        evaluations.append(
            scored(f"r{i}", Correctness=correctness, Accuracy=correctness, Tone=rng.randint(1, 5))
        )
    evaluations.append(scored("r-missing", Correctness=1, Tone=5))  # no Accuracy: left out of that pair
    evaluations.append({"grading_run_id": "list", "iteration": 0, "kind": "list", "criteria": []})
    report = build_report([], evaluations, days=None)
    assert [(p.first, p.second, p.answers) for p in report.correlated] == [("Correctness", "Accuracy", 12)]
    assert report.correlated[0].r == pytest.approx(1.0)
    table = report_table(report)
    assert "Correctness & Accuracy: r = 1.00 over 12 answers" in table
    assert "merge or drop one" in table
    body = "\n".join(texts(report_blocks(report, channel="C1")))
    assert "*Correctness* & *Accuracy* (r = 1.00 over 12 answers)" in body
    assert "merge or drop one" in body


def test_no_reviews_reads_plainly_everywhere():
    report = build_report([], [], days=3)
    assert "No reviews yet" in report_table(report)
    blocks = report_blocks(report, channel="C1")
    assert "No reviews in <#C1> (last 3 days) yet" in "\n".join(texts(blocks))
    assert_within_slack_limits(blocks)
    buffer = io.BytesIO()
    render_chart(report, buffer)
    assert buffer.getvalue().startswith(PNG_SIGNATURE)


# --- Slack limits and the chart -------------------------------------------------------------------


def big_report():
    """30 long-named criteria, each with enough reviews, and every dimension pair correlated."""
    names = [
        f"Dimension {i:02d} " + "with a very long & <detailed> description " * 12 for i in range(MAX_CRITERIA)
    ]
    rng = random.Random(11)
    rows, evaluations = [], []
    for i in range(12):
        level = rng.randint(1, 5)
        evaluations.append(scored(f"r{i}", **dict.fromkeys(names, level)))
        for name in names:
            rows.append(review(name, str(level), str(rng.randint(1, 5)), run=f"r{i}"))
    return build_report(rows, evaluations, days=30)


def test_thirty_criteria_fit_one_slack_message():
    report = big_report()
    assert len(report.criteria) == MAX_CRITERIA
    assert len(report.correlated) == MAX_CRITERIA * (MAX_CRITERIA - 1) // 2
    message = report_blocks(report, channel="C1")
    assert_within_slack_limits(message)
    body = "\n".join(texts(message))
    assert all(f"Dimension {i:02d} with" in body for i in range(MAX_CRITERIA))
    assert "&lt;detailed&gt;" in body and "<detailed>" not in body
    assert "more pairs" in body


def png_size(data):
    assert data.startswith(PNG_SIGNATURE)
    with Image.open(io.BytesIO(data)) as image:
        image.verify()
    with Image.open(io.BytesIO(data)) as image:
        return image.size


def test_chart_is_a_readable_png(tmp_path):
    rows = reviews_of("Cites a source", TEN_PASS_FAIL) + reviews_of("Tone", [("3", "4")] * 3)
    path = tmp_path / "chart.png"
    render_chart(build_report(rows, [], days=30), str(path))
    width, height = png_size(path.read_bytes())
    assert 800 <= width <= 2000 and 300 <= height <= 1000


def test_chart_shows_each_criterions_kappa_or_why_not_and_its_agreement_against_the_baseline():
    rows = reviews_of("Cites a source", TEN_PASS_FAIL) + reviews_of("Tone", [("3", "4")] * 3)
    report = build_report(rows, [], days=30)
    cites, tone = (c.agreement for c in report.criteria)
    figure = chart_figure(report)

    assert chart.title(figure) == f"Grader agreement, last 30 days — {report.summary()}"
    kappa, agreement = chart.panels(figure)
    assert chart.row_labels(kappa) == ["Cites a source", "Tone"]
    assert kappa.get_title() == "Cohen's κ per criterion, with its 95% interval (red: flagged)"
    (cites_bar, tone_band) = chart.bars(kappa)
    assert (cites_bar.row, cites_bar.width, cites_bar.hatched) == (0, pytest.approx(cites.kappa), False)
    # κ 0.4 over 10 runs: its interval reaches above the 0.6 bar, so it is not flagged.
    assert cites_bar.colour == to_rgba(KAPPA_COLOURS["ok"])
    assert chart.value_labels(kappa) == [f"{cites.kappa:.2f}"]
    assert tone_band.row == 1 and tone_band.hatched  # 3 reviews: no κ, and the band says why
    assert chart.notes(kappa) == [tone.note] and "3 reviews" in tone.note
    assert agreement.get_title() == "Agreement vs. a grader always giving the majority verdict"
    series = {
        label: [bar.width for bar in chart.bars(agreement) if bar.colour == to_rgba(colour)]
        for label, colour in AGREEMENT_COLOURS.items()
    }
    assert series == {
        "agreement with reviewers": pytest.approx([0.7, tone.percent_agreement]),  # by hand, above
        "always-majority baseline": pytest.approx([0.6, tone.baseline]),
    }
    assert chart.value_labels(agreement) == [
        f"{value:.0%}" for value in (0.7, tone.percent_agreement, 0.6, tone.baseline)
    ]
    assert sorted(chart.legend_labels(figure)) == [
        "agreement with reviewers",
        "always-majority baseline",
        "no κ (why is written in the band)",
        "κ target 0.6",
    ]


def test_chart_without_reviews_says_so_instead_of_drawing_empty_panels():
    figure = chart_figure(build_report([], [], days=3))

    (empty,) = chart.panels(figure)
    assert [text.get_text() for text in empty.texts] == ["No reviews yet"] and not empty.axison


def test_chart_grows_with_thirty_criteria():
    buffer = io.BytesIO()
    render_chart(big_report(), buffer)
    width, height = png_size(buffer.getvalue())
    assert 800 <= width <= 2000 and 1200 <= height <= 2000
