"""People's own agreement (two people's verdicts on one iteration) beside the grader's, on known data,
and how many reviews were one-click Agrees."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sklearn.metrics import cohen_kappa_score

from bot.agreement.people import people_pairs, reviewing_blocks, reviewing_table
from bot.agreement.report import build_report, report_blocks, report_table
from bot.db.reviews import ReviewRow, ReviewVia
from bot.home import ChannelHome, home_view
from bot.slack.blocks import block_dicts
from tests.bot.slack.block_assertions import all_text

START = datetime(2026, 3, 1, tzinfo=UTC)
CITES = "Cites a source"

# U1 and U2 on ten iterations: both pass 4, both fail 3, U1 fail/U2 pass 2, U1 pass/U2 fail 1.
# p_o = .7; p_e = .6 * .5 + .4 * .5 = .5 (U2 said pass 6 times, U1 5); κ = .2 / .5 = .4.
TEN_PAIRS = [("pass", "pass")] * 4 + [("fail", "fail")] * 3 + [("fail", "pass")] * 2 + [("pass", "fail")]


def row(run: str, reviewer: str, human: str, *, grader: str = "pass", via: ReviewVia = "form", at: int = 0):
    return ReviewRow(
        "T1", "C1", "1.0", run, 0, CITES, grader, human, "", reviewer, START + timedelta(minutes=at), via=via
    )


def double_reviewed(pairs, *, grader=lambda first, second: "pass"):
    """Per pair, one run reviewed by U1 (first) then U2."""
    rows = []
    for i, (first, second) in enumerate(pairs):
        verdict = grader(first, second)
        rows += [
            row(f"run-{i}", "U1", first, grader=verdict, at=2 * i),
            row(f"run-{i}", "U2", second, grader=verdict, via="blind", at=2 * i + 1),
        ]
    return rows


def test_people_pairs_take_the_first_two_people_of_each_iteration_and_no_single_review():
    rows = [
        row("run-a", "U1", "pass", at=0),
        row("run-a", "U2", "fail", at=1),
        row("run-a", "U3", "pass", at=2),  # a third person adds no pair
        row("run-b", "U1", "fail", at=3),  # one person: no pair
    ]

    assert people_pairs(rows) == [("run-a", (True, False))]


def test_people_agreement_and_kappa_on_known_pairs():
    report = build_report(double_reviewed(TEN_PAIRS), [], days=None)

    assert report.reviewing is not None
    [figures] = report.reviewing.people
    people = figures.people
    first = [a == "pass" for a, _ in TEN_PAIRS]
    second = [b == "pass" for _, b in TEN_PAIRS]
    assert people.n == 10 and people.clusters == 10
    assert people.percent_agreement == 0.7
    assert round(people.kappa, 6) == round(cohen_kappa_score(first, second), 6) == 0.4
    assert (
        people.agreement_interval is not None
        and people.agreement_interval[0] < 0.7 < people.agreement_interval[1]
    )
    assert report.reviewing.double_reviewed == 10
    shown = all_text(report_blocks(report, channel="C1"))
    assert (
        f"*{CITES}* — people agree 70% (" in shown
        and "on 10 double-reviewed verdicts from 10 runs, κ 0.40 (" in shown
    )


def test_a_grader_whose_interval_lies_under_the_people_is_flagged_below_them():
    # The two people always agree (pass); the grader said fail every time: 0% beside their 100%.
    report = build_report(double_reviewed([("pass", "pass")] * 10, grader=lambda *_: "fail"), [], days=None)

    assert report.reviewing is not None
    [figures] = report.reviewing.people
    assert figures.people.percent_agreement == 1.0 and figures.grader.percent_agreement == 0.0
    assert figures.comparison == "below" and report.reviewing.flagged == [figures]
    shown = all_text({"blocks": block_dicts(reviewing_blocks(report.reviewing))})
    assert f"⚠️ *{CITES}*" in shown and "grader below the people's own agreement" in shown
    assert f"Grader below the people's own agreement: {CITES}" in report_table(report)


def test_a_grader_as_good_as_the_people_is_within_their_agreement():
    # The grader said what U1 said; U2 differs from U1 on one iteration of ten: people 90%, grader 95%.
    pairs = [("pass", "pass")] * 5 + [("fail", "fail")] * 4 + [("pass", "fail")]
    report = build_report(double_reviewed(pairs, grader=lambda first, _: first), [], days=None)

    assert report.reviewing is not None
    [figures] = report.reviewing.people
    assert figures.people.percent_agreement == 0.9 and figures.grader.percent_agreement == 0.95
    assert figures.comparison == "within" and not report.reviewing.flagged
    assert "grader within the people's own agreement" in "\n".join(reviewing_table(report.reviewing))


def test_under_ten_pairs_the_people_agreement_shows_its_count_and_no_rate():
    report = build_report(double_reviewed(TEN_PAIRS[:4]), [], days=None)

    assert report.reviewing is not None
    [figures] = report.reviewing.people
    assert figures.comparison is None
    shown = all_text({"blocks": block_dicts(reviewing_blocks(report.reviewing))})
    assert "4 double-reviewed verdicts from 4 runs so far; people's agreement is shown from 10" in shown
    assert "people agree" not in shown
    table = "\n".join(reviewing_table(report.reviewing))
    assert "too few to compare" in table


def test_one_click_agrees_are_counted_per_review_with_their_share():
    rows = [
        row("run-1", "U1", "pass", via="agree"),
        row("run-2", "U1", "pass", via="agree"),
        row("run-3", "U1", "fail", via="form"),
        row("run-4", "U2", "pass", via="blind"),
    ]
    report = build_report(rows, [], days=None)

    assert report.reviewing is not None
    assert (report.reviewing.reviews, report.reviewing.one_click, report.reviewing.blind) == (4, 2, 1)
    assert report.reviewing.people == []  # no iteration reviewed by two people
    assert "Of 4 reviews, 2 (50%) were one-click Agrees" in all_text(report_blocks(report, channel="C1"))
    assert "and 1 blind; 0 iterations reviewed by two people." in report_table(report)


def test_the_home_tab_shows_the_people_beside_the_grader():
    report = build_report(double_reviewed(TEN_PAIRS), [], days=None)

    view = home_view([ChannelHome("C1", None, [], report)])

    shown = all_text(view)
    assert "*People's own agreement*" in shown and f"*{CITES}* — people agree 70% (" in shown
    assert "Of 20 reviews, 0 (0%) were one-click Agrees" in shown
