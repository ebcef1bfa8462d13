"""What produced verdicts and what waits for people: coverage, the waiting list and the
replay's provenance lines, from hand-made rows (no database, no model)."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.agreement.comparison import compare, comparison_table
from bot.agreement.replay import Case
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.provenance.grouping import coverage, provenance_counts, waiting_for_people
from bot.vocabulary.provenance import EvaluationProvenance

NOW = datetime.now(UTC)


def record(
    run: str, made_by: EvaluationProvenance | None, cannot_tell: tuple[str, ...] = ()
) -> EvaluationRecord:
    criteria = [
        {"name": name, "passed": False, "gap": "", "cannot_tell": name in cannot_tell}
        for name in ("Cites a source", "Under 200 words")
    ]
    evaluation = {"criteria": criteria}
    return EvaluationRecord(
        run, 1, "T1", "C1", "1.0", f"{run}.1", evaluation, "rubric", NOW, provenance=made_by
    )


def review(run: str, criterion: str = "Cites a source") -> ReviewRow:
    return ReviewRow("T1", "C1", "1.0", run, 1, criterion, "pass", "fail", "", "U1", NOW)


def test_coverage_counts_only_judged_criteria_and_a_reviewed_abstention_waits_no_more():
    records = [record("a", None, cannot_tell=("Cites a source",)), record("b", None)]

    assert (
        coverage(r.evaluation for r in records).judged,
        coverage(r.evaluation for r in records).total,
    ) == (3, 4)
    (waiting,) = waiting_for_people(records, [])
    assert waiting.criteria == ["Cites a source"] and waiting.message_ts == "a.1"
    assert waiting_for_people(records, [review("a")]) == []


def test_the_replay_table_names_what_produced_each_sides_verdicts():
    cases = [Case(record("a", None), (review("a"),))]
    original = {c.key: c.original_verdicts for c in cases}
    before = provenance_counts(["rubric v1 · grader grader-2026-01-01"])
    after = provenance_counts(["rubric v2 · grader candidate-2026-02-01"])
    result = compare(
        cases, original, original, labels=("original", "candidate"), planned=1, provenance=(before, after)
    )

    table = comparison_table(result)
    assert "original verdicts from: rubric v1 · grader grader-2026-01-01 (1 case)" in table
    assert "candidate verdicts from: rubric v2 · grader candidate-2026-02-01 (1 case)" in table
