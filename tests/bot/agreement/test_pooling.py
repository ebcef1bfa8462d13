"""A criterion pooled over the rubric versions in which its text is unchanged, per grader model, and
the report built on it: n pooled across versions, κ once pooled n reaches 10, coverage per criterion
(from hand-made rows: no database, no model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.agreement.pooling import pooled_criteria
from bot.agreement.report import build_report, report_blocks, report_table
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from tests.bot.agreement.provenances import provenance
from tests.bot.slack.block_assertions import texts

START = datetime(2026, 1, 1, tzinfo=UTC)

V1 = "- Cites a source\n- Is polite"
V2 = "- Is polite\n- Cites a source\n- Is short"
"""V1 reordered, with a criterion added."""
V3 = "- Is polite\n- Cites a peer-reviewed source\n- Is short"
"""V2 with one criterion's text rewritten."""

SCORED = """dimensions:
  - name: Tone
    anchors: {{5: {five}, 3: Curt., 1: Rude.}}
aggregation: min
pass_score: 3
"""


def record(
    run: str,
    at: int,
    rubric: str,
    version: str,
    *,
    model: str = "grader-1",
    cannot_tell: tuple[str, ...] = (),
    scores: dict[str, int] | None = None,
) -> EvaluationRecord:
    if scores is not None:
        kind = "scored"
        criteria = [{"name": n, "passed": s >= 3, "gap": "", "score": s} for n, s in scores.items()]
    else:
        kind = "list"
        names = [line.removeprefix("- ") for line in rubric.splitlines()]
        criteria = [
            {"name": n, "passed": True, "gap": "", "score": None, "cannot_tell": n in cannot_tell}
            for n in names
        ]
    evaluation = {"grading_run_id": run, "iteration": 0, "kind": kind, "criteria": criteria}
    return EvaluationRecord(
        run,
        0,
        "T1",
        "C1",
        "1.0",
        f"{run}.1",
        evaluation,  # type: ignore[arg-type]
        rubric,
        START + timedelta(minutes=at),
        provenance=provenance(version, model),
    )


def review(run: str, criterion: str, grader: str = "pass", human: str = "pass") -> ReviewRow:
    return ReviewRow("T1", "C1", "1.0", run, 0, criterion, grader, human, "", "U1", START)


def test_an_unchanged_criterion_pools_across_versions_and_an_added_one_starts_at_its_version():
    records = [record(f"a{i}", i, V1, "v1") for i in range(6)] + [
        record(f"b{i}", 10 + i, V2, "v2") for i in range(6)
    ]
    reviews = [review(r.grading_run_id, "Cites a source") for r in records]
    reviews += [review(r.grading_run_id, "Is short") for r in records[6:]]

    pooled = {p.name: p for p in pooled_criteria(reviews, records)}

    assert set(pooled) == {"Cites a source", "Is polite", "Is short"}
    cites = pooled["Cites a source"]
    assert (len(cites.reviews), cites.versions, cites.since) == (12, ["v1", "v2"], None)
    assert (cites.judged, cites.graded) == (12, 12)
    assert (pooled["Is short"].since, pooled["Is short"].change) == ("v2", "added")


def test_a_rewritten_criterion_starts_afresh_and_the_old_text_keeps_its_own_line():
    records = [record("a", 0, V2, "v2"), record("b", 1, V3, "v3")]

    pooled = {p.name: p for p in pooled_criteria([], records)}

    assert pooled["Cites a source"].versions == ["v2"]
    new = pooled["Cites a peer-reviewed source"]
    assert (new.versions, new.since, new.change) == (["v3"], "v3", "text changed")
    assert pooled["Is polite"].versions == ["v2", "v3"] and pooled["Is polite"].since is None


def test_a_dimension_whose_anchors_changed_is_another_criterion_and_each_grader_model_its_own():
    records = [
        record("a", 0, SCORED.format(five="Warm."), "v1", scores={"Tone": 5}),
        record("b", 1, SCORED.format(five="Warm and brief."), "v2", scores={"Tone": 5}),
        record("c", 2, SCORED.format(five="Warm and brief."), "v2", scores={"Tone": 4}, model="grader-2"),
    ]

    pooled = pooled_criteria([review("b", "Tone", "5", "4"), review("c", "Tone", "4", "4")], records)

    assert [(p.key.grader_model, p.versions, p.since, p.change, len(p.reviews)) for p in pooled] == [
        ("grader-1", ["v1"], None, None, 0),
        ("grader-1", ["v2"], "v2", "text changed", 1),
        ("grader-2", ["v2"], None, None, 1),
    ]


def test_the_report_pools_an_unchanged_criterion_to_a_kappa_and_flags_a_criterion_the_grader_cannot_tell():
    # Six runs under v1, six under v2 (the rubric gained "Is short"): 12 reviews of "Cites a source"
    # pass the κ minimum only pooled. The grader could not tell "Is polite" in 9 runs of 12.
    records = [
        record(f"a{i}", i, V1, "v1", cannot_tell=("Is polite",) if i < 5 else ()) for i in range(6)
    ] + [record(f"b{i}", 10 + i, V2, "v2", cannot_tell=("Is polite",) if i < 4 else ()) for i in range(6)]
    verdicts = [("pass", "pass"), ("fail", "fail")] * 5 + [("pass", "fail"), ("fail", "fail")]
    reviews = [
        review(r.grading_run_id, "Cites a source", grader, human)
        for r, (grader, human) in zip(records, verdicts, strict=True)
    ]

    report = build_report(reviews, [r.evaluation for r in records], days=None, records=records)

    lines = {c.name: c for c in report.criteria}
    cites, polite = lines["Cites a source"], lines["Is polite"]
    assert (cites.agreement.n, cites.agreement.clusters) == (12, 12)
    assert cites.agreement.kappa is not None and cites.agreement.kappa_interval is not None
    assert not cites.flagged
    assert (polite.pooled.judged, polite.pooled.graded) == (3, 12) and polite.low_coverage and polite.flagged
    body = "\n".join(texts(report_blocks(report, channel="C1")))
    assert "*Cites a source* (pass/fail) — 12 reviews from 12 runs" in body
    assert "coverage 25% (" in body and "of 12 ⚠️" in body
    assert "Rubric v1, v2 · grader grader-1." in body
    assert "since v2 (added)" in body and "can't tell" in body
    table = report_table(report)
    assert "Flagged: Is polite" in table and "coverage under 50%" in table
