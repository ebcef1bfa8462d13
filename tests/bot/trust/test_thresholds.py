"""Per criterion thresholds from a channel's trusted reviews (pooled over rubric versions with the
criterion's text unchanged, per grader model), the figures the report shows under them, and the
thresholds a run reads: from hand-made rows, no database, no model."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from bot.agent.worker import ThreadContext
from bot.agreement.trust_figures import holds_words, threshold_words, trust_figures, trusted_reviews
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.db.trust import TrustLevel, TrustThreshold
from bot.listeners.command_text import CommandError, trust_level
from bot.trust.thresholds import channel_thresholds, trust_source
from bot.vocabulary.workspace import Workspace
from grading import parse_rubric
from grading.selective import min_kept
from tests.bot.agreement.test_pooling import V1, V2, provenance

START = datetime(2026, 1, 1, tzinfo=UTC)
CITES, POLITE = "Cites a source", "Is polite"
TARGET, RISK = 0.9, 0.05


def record(run: str, rubric: str, version: str, confidence: dict[str, float], model: str = "grader-1"):
    names = [line.removeprefix("- ") for line in rubric.splitlines()]
    criteria = [
        {"name": n, "passed": True, "gap": "", "score": None, "confidence": confidence.get(n, 1.0)}
        for n in names
    ]
    evaluation = {"grading_run_id": run, "iteration": 0, "kind": "list", "criteria": criteria}
    return EvaluationRecord(
        run,
        0,
        "T1",
        "C1",
        "1.0",
        f"{run}.1",
        evaluation,
        rubric,
        START,
        provenance=provenance(version, model),
    )  # type: ignore[arg-type]


def review(run: str, criterion: str, agreed: bool, at: int = 0) -> ReviewRow:
    human = "pass" if agreed else "fail"
    return ReviewRow(
        "T1", "C1", "1.0", run, 0, criterion, "pass", human, "", "U1", START + timedelta(minutes=at)
    )


def channel(sure: int = 30, unsure: int = 10, unsure_wrong: int = 5):
    """`sure` runs where the grader was unanimous on CITES and people agreed, then `unsure` where it
    split 2–1 and people disagreed on `unsure_wrong` of them; half under V1, half under V2 (CITES's
    text unchanged, reordered). POLITE is reviewed on the first 10 runs only."""
    records, reviews = [], []
    for i in range(sure + unsure):
        run = f"r{i}"
        confident = i < sure
        records.append(
            record(run, V1 if i % 2 else V2, "v1" if i % 2 else "v2", {CITES: 1.0 if confident else 2 / 3})
        )
        reviews.append(review(run, CITES, agreed=confident or i >= sure + unsure_wrong))
        if i < 10:
            reviews.append(review(run, POLITE, agreed=True))
    return records, reviews


def test_a_criterion_pooled_over_versions_gets_the_threshold_its_reviews_promise():
    records, reviews = channel()
    found = {t.name: t for t in channel_thresholds(reviews, records, TARGET, RISK)}

    # 30 unanimous verdicts all agreed: 0.05 ** (1 / 30) > 0.9; with the 10 split ones (5 wrong) not.
    assert found[CITES].threshold == 1.0
    assert found[CITES].reviews == 40  # both versions pooled
    assert found[POLITE].threshold is None  # 10 reviews: fewer than any threshold needs
    assert found[POLITE].reviews == 10
    assert {t.grader_model for t in found.values()} == {"grader-1"}


def test_when_split_verdicts_agree_too_the_threshold_comes_down_to_them():
    records, reviews = channel(unsure_wrong=0)
    [cites] = [t for t in channel_thresholds(reviews, records, TARGET, RISK) if t.name == CITES]
    assert cites.threshold == pytest.approx(2 / 3)


def test_another_grader_model_is_calibrated_apart():
    records, reviews = channel()
    records += [record(f"o{i}", V1, "v1", {CITES: 1.0}, model="grader-2") for i in range(5)]
    reviews += [review(f"o{i}", CITES, agreed=True) for i in range(5)]
    found = {(t.name, t.grader_model): t for t in channel_thresholds(reviews, records, TARGET, RISK)}
    assert found[(CITES, "grader-1")].threshold == 1.0
    assert found[(CITES, "grader-2")].threshold is None
    assert found[(CITES, "grader-2")].reviews == 5


def test_a_later_review_of_a_verdict_replaces_the_earlier_one():
    records, reviews = channel(unsure_wrong=0)
    reviews += [review("r0", CITES, agreed=False, at=5)]  # the first review of r0 is overturned
    [cites] = [t for t in channel_thresholds(reviews, records, TARGET, RISK) if t.name == CITES]
    assert cites.reviews == 40
    assert cites.threshold is None or cites.threshold > 2 / 3


def test_the_report_shows_threshold_coverage_agreement_and_whether_the_target_holds():
    records, reviews = channel()
    thresholds = channel_thresholds(reviews, records, TARGET, RISK)
    figures = trust_figures(TARGET, RISK, thresholds, reviews, records)
    by_name = {c.name: c for c in figures.criteria}

    cites = by_name[CITES]
    assert (cites.acted, cites.graded) == (30, 40)  # verdicts acted on ÷ all
    assert cites.coverage == pytest.approx(0.75)
    assert (
        cites.coverage_interval is not None and cites.coverage_interval[0] < 0.75 < cites.coverage_interval[1]
    )
    assert (cites.agreed, cites.reviewed) == (30, 30)
    low, high = cites.agreement_interval
    assert high == 1.0 and 0.88 < low < 0.9  # exact 95% interval of 30 of 30
    assert threshold_words(figures, cites) == "λ 1.00"
    assert holds_words(figures, cites) == "holds"

    polite = by_name[POLITE]
    assert polite.needed == min_kept(TARGET, RISK) - 10
    assert threshold_words(figures, polite).startswith(
        f"no threshold yet: {polite.needed} more trusted reviews needed"
    )
    assert (polite.acted, polite.graded) == (40, 40)  # no threshold: every verdict acted on


def test_too_few_reviewed_verdicts_say_nothing_of_the_agreement():
    records, reviews = channel()
    thresholds = channel_thresholds(reviews, records, TARGET, RISK)
    window = [r for r in reviews if r.grading_run_id in {"r0", "r1", "r2"}]
    [cites] = [
        c for c in trust_figures(TARGET, RISK, thresholds, window, records).criteria if c.name == CITES
    ]
    assert cites.reviewed == 3 and cites.agreement is None and cites.agreement_interval is None


async def test_a_run_reads_its_channel_thresholds_for_its_grader_model_by_criterion_text():
    stored = [
        TrustThreshold("grader-1", "cites a source", CITES, TARGET, RISK, 1.0, 40),
        TrustThreshold("grader-1", "is polite", POLITE, TARGET, RISK, None, 10),
        TrustThreshold("grader-2", "is polite", POLITE, TARGET, RISK, 0.5, 40),
        TrustThreshold("grader-1", "is short", "Is short", 0.8, RISK, 0.5, 40),  # an earlier level's
    ]

    reads: list[str] = []

    class Store:
        async def trust_levels(self, workspace, channel, limit):
            reads.append("levels")
            return [TrustLevel(TARGET, "U1", START)]

        async def trust_thresholds(self, workspace, channel):
            reads.append("thresholds")
            return stored

    source = trust_source(Store())  # type: ignore[arg-type]
    runtime = SimpleNamespace(context=ThreadContext(Workspace("W"), "C1"))
    rubric = parse_rubric("- Is short\n- Cites a source.\n- Is polite")
    assert await source(rubric, "grader-1", runtime) == {"Cites a source.": 1.0}
    assert await source(rubric, "grader-2", runtime) == {"Is polite": 0.5}
    assert await source(rubric, "grader-1", SimpleNamespace(context=None)) == {}
    # Read once per grader model a run: its later iterations are held to the same thresholds.
    assert await source(rubric, "grader-1", runtime) == {"Cites a source.": 1.0}
    assert reads == ["levels", "thresholds"] * 2
    another_run = SimpleNamespace(context=ThreadContext(Workspace("W"), "C1"))
    assert await source(rubric, "grader-1", another_run) == {"Cites a source.": 1.0}
    assert len(reads) == 6


@pytest.mark.parametrize(("text", "level"), [("0.9", 0.9), ("90%", 0.9), (" OFF ", None), ("0.5", 0.5)])
def test_trust_levels_are_read_as_typed(text, level):
    assert trust_level(text) == level


@pytest.mark.parametrize("text", ["1", "0.3", "ninety", "nan", "95%%", "-0.9"])
def test_a_level_out_of_range_is_refused_saying_what_is_taken(text):
    with pytest.raises(CommandError, match=r"takes a level from 0.5 to 0.99 .* or `off`, not"):
        trust_level(text)


def test_thresholds_learn_only_from_cases_calibration_would_trust():
    def by(reviewer: str, run: str, editor: bool = False) -> ReviewRow:
        return ReviewRow("T1", "C1", "1.0", run, 0, CITES, "pass", "pass", "", reviewer, START, editor=editor)

    rows = [by("UED", "r1", editor=True), by("UA", "r2"), by("UA", "r3"), by("UB", "r3"), by("UC", "r3")]
    # Editors recorded: an editor alone is trusted, one person alone is not, three agreeing are.
    assert {(r.grading_run_id, r.reviewer) for r in trusted_reviews(rows)} == {
        ("r1", "UED"),
        ("r3", "UA"),
        ("r3", "UB"),
        ("r3", "UC"),
    }
    # No editor anywhere: two people agreeing are enough, one is not.
    assert {r.grading_run_id for r in trusted_reviews(rows[1:4])} == {"r3"}


def withheld(run: str, confidence: float, said: bool) -> EvaluationRecord:
    """CITES withheld by a threshold of 1: the grader said `said` with `confidence`."""
    found = record(run, V1, "v1", {CITES: confidence})
    cites = next(c for c in found.evaluation["criteria"] if c["name"] == CITES)
    cites.update(passed=False, cannot_tell=True, trust_threshold=1.0, withheld_passed=said)
    return found


def reviewed_withheld(run: str, human: str) -> ReviewRow:
    return ReviewRow("T1", "C1", "1.0", run, 0, CITES, "cannot_tell", human, "", "U1", START)


def test_reviews_of_withheld_verdicts_can_bring_a_threshold_down():
    # 30 unanimous verdicts agreed: the threshold is 1 and every split verdict is withheld since.
    records, reviews = channel(sure=30, unsure=0)
    [before] = [t for t in channel_thresholds(reviews, records, TARGET, RISK) if t.name == CITES]
    assert before.threshold == 1.0

    # People review 40 withheld 2–1 verdicts and find the grader right each time: what it said
    # under the threshold is evidence, so the threshold comes down to them.
    records += [withheld(f"w{i}", 2 / 3, said=True) for i in range(40)]
    reviews += [reviewed_withheld(f"w{i}", "pass") for i in range(40)]
    [after] = [t for t in channel_thresholds(reviews, records, TARGET, RISK) if t.name == CITES]
    assert after.reviews == 70
    assert after.threshold == pytest.approx(2 / 3)


def test_withheld_verdicts_people_overturn_keep_the_threshold_up_and_are_never_counted_as_acted_on():
    records, reviews = channel(sure=30, unsure=0)
    records += [withheld(f"w{i}", 2 / 3, said=True) for i in range(40)]
    reviews += [reviewed_withheld(f"w{i}", "fail" if i % 2 else "pass") for i in range(40)]
    thresholds = channel_thresholds(reviews, records, TARGET, RISK)
    assert next(t for t in thresholds if t.name == CITES).threshold == 1.0

    figures = trust_figures(TARGET, RISK, thresholds, reviews, records)
    cites = next(c for c in figures.criteria if c.name == CITES)
    assert cites.reviewed == 30 and cites.agreed == 30  # the acted-on verdicts only
    assert cites.acted == 30 and cites.graded == 70
