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


def audit(iterations: int, loop_passed: bool, verdict: AuditVerdict) -> AuditRow:
    return AuditRow(1, "T1", "C1", "1.0", "g", iterations, loop_passed, "m", verdict, "", datetime.now(UTC))


def test_the_disagreement_is_among_runs_the_loop_passed_overall_and_by_iterations():
    rows = [
        audit(1, True, "pass"),
        audit(1, True, "pass"),
        audit(2, True, "fail"),
        audit(2, True, "pass"),
        audit(4, True, "fail"),
        audit(3, False, "fail"),  # the loop did not pass it: not in the shares
        audit(1, True, "error"),  # the audit grader failed: left out and said so
    ]

    figures = audit_figures(rows)

    assert (figures.overall.passed, figures.overall.failed_by_audit) == (5, 2)
    assert [(s.passed, s.failed_by_audit) for s in figures.by_iterations.values()] == [(2, 0), (2, 1), (1, 1)]
    assert audit_lines(figures) == [
        "Audit disagreement: of the runs the loop's grader passed, the audit grader failed "
        "5 audits: too few audits to read.",
        "By iterations the run took — 1 iteration: 2 audits: too few audits to read · 2 iterations: "
        "2 audits: too few audits to read · 3+ iterations: 1 audit: too few audits to read. Runs that "
        "take more iterations are the harder requests, so a share that rises with iterations does not "
        "by itself show the worker learning the grader.",
        "1 audit(s) failed to grade and are left out.",
    ]
    assert audit_lines(audit_figures([])) == []


def test_a_bucket_of_ten_audits_or_more_gives_its_share_with_a_95_percent_interval():
    rows = [audit(1, True, "fail" if i < 3 else "pass") for i in range(12)] + [audit(2, True, "fail")]

    figures = audit_figures(rows)

    # Wilson's interval on 3 of 12, as scipy computes it.
    assert figures.by_iterations["1"].words == "3 of 12 audited: 25% (95% CI 9%–53%)"
    assert figures.by_iterations["2"].words == "1 audit: too few audits to read"
    assert figures.overall.words == "4 of 13 audited: 31% (95% CI 13%–58%)"


def test_an_exported_row_carries_the_audit_only_on_the_iteration_the_audit_graded():
    audits = {"g": audit(2, True, "fail")}  # the run took 2 iterations: 0 and 1 (0-based)

    assert exported_audit(audits, "g", 1) == {"model": "m", "verdict": "fail", "reason": ""}
    assert exported_audit(audits, "g", 0) is None  # an earlier draft: the audit never saw it
    assert exported_audit(audits, "g", 2) is None  # no such iteration
    assert exported_audit(audits, "other", 1) is None  # a run nobody audited
