"""The audit grader's pieces: which runs it audits, and how its disagreement is reported."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.audit.export import exported_audit
from bot.audit.report import audit_figures, audit_lines
from bot.audit.selection import is_audited
from bot.db.audits import AuditRow, AuditVerdict


def test_the_share_audited_is_about_the_share_asked_and_the_same_every_time_for_a_run():
    chosen = [run for run in range(10_000) if is_audited(run, 0.1)]
    assert 900 < len(chosen) < 1100
    assert chosen == [run for run in range(10_000) if is_audited(run, 0.1)]  # reproducible
    assert all(is_audited(run, 1) for run in range(1000))
    assert not any(is_audited(run, 0) for run in range(1000))
    assert set(chosen) <= {run for run in range(10_000) if is_audited(run, 0.5)}  # a larger share adds runs


def audit(iterations: int, loop_passed: bool, verdict: AuditVerdict, first: str | None = None) -> AuditRow:
    """An audit of a run of `iterations` whose first iteration the loop's grader judged `first`."""
    return AuditRow(
        1,
        "T1",
        "C1",
        "1.0",
        "g",
        iterations,
        loop_passed,
        "m",
        verdict,
        "",
        datetime.now(UTC),
        first_result=first,
    )


def test_the_disagreement_is_among_runs_the_loop_passed_overall_and_by_iterations_beside_the_runs():
    rows = [
        audit(1, True, "pass"),
        audit(1, True, "pass"),
        audit(2, True, "fail"),
        audit(2, True, "pass"),
        audit(4, True, "fail"),
        audit(3, False, "fail"),  # the loop did not pass it: not in the shares
        audit(1, True, "error"),  # the audit grader failed: left out and said so
    ]

    figures = audit_figures(rows, {1: 30, 2: 12, 3: 4, 5: 1})

    assert (figures.overall.passed, figures.overall.failed_by_audit) == (5, 2)
    buckets = figures.by_iterations.values()
    assert [(b.runs, b.audited, b.share.passed, b.share.failed_by_audit) for b in buckets] == [
        (30, 3, 2, 0),
        (12, 2, 2, 1),
        (5, 2, 1, 1),
    ]
    lines = audit_lines(figures)
    assert lines[:2] == [
        "Audit disagreement: of the runs the loop's grader passed, the audit grader failed "
        "5 audits: too few audits to read.",
        "By iterations the run took — 1 iteration: 30 runs, 3 audited: too few audits to read · "
        "2 iterations: 12 runs, 2 audited: too few audits to read · 3+ iterations: 5 runs, 2 audited: "
        "too few audits to read.",
    ]
    assert "Harder requests take more iterations" in lines[2]
    assert "worker learning the grader" in lines[2] and "first grade" in lines[2]
    assert lines[-1] == "1 audit(s) failed to grade and are left out."
    assert audit_lines(audit_figures([])) == []


def test_a_bucket_of_ten_audits_or_more_gives_its_share_with_a_95_percent_interval():
    rows = [audit(1, True, "fail" if i < 3 else "pass") for i in range(12)] + [audit(2, True, "fail")]

    figures = audit_figures(rows, {1: 40, 2: 3})

    # Wilson's interval on 3 of 12, as scipy computes it.
    assert figures.by_iterations["1"].words("1") == (
        "1 iteration: 40 runs, 12 audited; the audit failed 3 of 12 the loop passed: 25% (95% CI 9%–53%)"
    )
    assert figures.by_iterations["2"].words("2") == "2 iterations: 3 runs, 1 audited: too few audits to read"
    assert figures.by_iterations["3+"].words("3+") == "3+ iterations: 0 runs, none audited"
    assert figures.overall.words == "4 of 13 audited: 31% (95% CI 13%–58%)"


def test_the_first_grade_is_compared_with_the_audit_on_the_same_runs_from_ten_audits_on():
    rows = (
        [audit(1, True, "pass", "satisfied")] * 4  # passed first time, and by the audit
        + [audit(1, True, "fail", "satisfied")]  # passed first time, failed by the audit
        + [audit(2, True, "pass", "needs_revision")] * 9  # revised, then passed by both
        + [audit(3, True, "fail", "needs_revision")] * 2  # revised to pass the loop, failed by the audit
        + [audit(3, False, "fail", "needs_revision")]  # never passed: the audit agrees
        + [audit(2, True, "pass", None)]  # its first iteration is not kept: left out
        + [audit(2, True, "error", "needs_revision")]  # the audit failed: left out
    )

    comparison = audit_figures(rows).first_grade

    assert (comparison.runs, comparison.agreed, comparison.first_failed) == (17, 7, 12)
    assert (comparison.fixed, comparison.loop_only) == (9, 2)
    assert comparison.words == (
        "First grade against the audit (the same runs, so the same requests): of 17 audited runs the "
        "loop's first grade failed 12; at the end the audit passed 9 of 12 revised runs: 75% (95% CI "
        "47%–91%): the revisions fixed what the grader saw, for an independent grader too. The audit "
        "still failed 2 the loop passed after revising: those revisions satisfied the loop's grader "
        "only. The first grade agreed with the audit on 7 of 17 audited runs: 41% (95% CI 22%–64%)."
    )
    few = audit_figures(rows[:9]).first_grade
    assert few.words.endswith(
        "(the same runs, so the same requests): 9 audited runs: too few audits to read."
    )
    fewer_revised = audit_figures(
        rows[:5] + rows[5:9] + [audit(1, True, "pass", "satisfied")] * 5
    ).first_grade
    assert fewer_revised.words.startswith(
        "First grade against the audit (the same runs, so the same requests): of 14 audited runs the "
        "loop's first grade failed 4: too few audits to read what revising did. The first grade agreed"
    )
    assert audit_figures([audit(1, True, "pass")]).first_grade.words == ""


def test_an_exported_row_carries_the_audit_only_on_the_iteration_the_audit_graded():
    audits = {"g": audit(2, True, "fail")}  # the run took 2 iterations: 0 and 1 (0-based)

    assert exported_audit(audits, "g", 1) == {"model": "m", "verdict": "fail", "reason": ""}
    assert exported_audit(audits, "g", 0) is None  # an earlier draft: the audit never saw it
    assert exported_audit(audits, "g", 2) is None  # no such iteration
    assert exported_audit(audits, "other", 1) is None  # a run nobody audited
