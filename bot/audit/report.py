"""What the audit shows, said with what it cannot show.

- The audit disagreement: among finished runs the loop's grader passed, the share the audit grader
  failed, overall and by the iterations the run took (1, 2, 3+), each bucket with how many runs took
  that many iterations and how many of them were audited. Runs that take more iterations are the
  harder requests, on which any two graders disagree more, so a share that rises with iterations
  does not by itself show the worker learning the grader (Pan et al. 2024, "Spontaneous reward
  hacking in iterative self-refinement").
- The comparison that controls for that: on the same audited runs (so the same requests, whatever
  their difficulty), the loop grader's verdict on the *first* answer against the audit's verdict on
  the *final* one. A first answer the loop failed whose final answer the audit passes is a revision
  that fixed what the grader saw in an independent grader's eyes too; one the loop passed after
  revising but the audit failed satisfied the loop's grader only.

Every share is said with its count and 95 % interval, and only from `MIN_COUNT_FOR_RATE` audits on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from bot.agreement.report import period_start
from bot.audit.auditor import VERDICTS
from bot.db.audits import ITERATION_BUCKETS, AuditRow, iteration_bucket
from bot.db.store import Store
from bot.feedback.satisfaction import MIN_COUNT_FOR_RATE, Rate
from bot.slack.blocks import block_dicts, plural, section_block
from bot.slack.messages import BlockJson
from bot.vocabulary.workspace import Workspace

TOO_FEW = "too few audits to read"
"""What a figure over fewer than `MIN_COUNT_FOR_RATE` audits says instead of a share."""


@dataclass
class AuditShare:
    """Audits of runs the loop passed: how many, and how many of them the audit grader failed."""

    passed: int = 0
    failed_by_audit: int = 0

    @property
    def rate(self) -> Rate:
        """The share the audit grader failed."""
        return Rate(self.failed_by_audit, self.passed)

    @property
    def words(self) -> str:
        """E.g. ``6 of 40 audited: 15% (95% CI 7–29%)``; under `MIN_COUNT_FOR_RATE` audits only
        how many, as too few to read; ``none audited`` for none."""
        if not self.passed:
            return "none audited"
        if self.passed < MIN_COUNT_FOR_RATE:
            return f"{plural(self.passed, 'audit')}: {TOO_FEW}"
        return self.rate.words("audited")


@dataclass
class IterationBucket:
    """The runs that took one bucket's number of iterations: how many the loop graded, how many
    were audited, and the audit disagreement among them."""

    runs: int = 0
    """Runs the loop's grader graded that took this many iterations (audited or not)."""
    audited: int = 0
    """Of them, those the audit grader graded (its failures included)."""
    share: AuditShare = field(default_factory=AuditShare)

    def words(self, bucket: str) -> str:
        """E.g. ``2 iterations: 60 runs, 12 audited; the audit failed 2 of 11 the loop passed: 18%
        (95% CI 5%–48%)``; under `MIN_COUNT_FOR_RATE` audits of runs the loop passed, no share."""
        iterations = f"{bucket} iteration{'' if bucket == '1' else 's'}"
        head = f"{iterations}: {plural(self.runs, 'run')}, "
        if not self.audited:
            return f"{head}none audited"
        head += f"{self.audited} audited"
        if self.share.passed < MIN_COUNT_FOR_RATE:
            return f"{head}: {TOO_FEW}"
        return f"{head}; the audit failed {self.share.rate.words('the loop passed')}"


@dataclass
class FirstGradeComparison:
    """On the audited runs whose first iteration the loop's grader judged: its verdict on the first
    answer against the audit's on the final answer (the same requests: their difficulty cancels)."""

    runs: int = 0
    """Audited runs with both verdicts (pass or fail)."""
    agreed: int = 0
    """Of them, those whose first grade the audit's grade matched."""
    first_failed: int = 0
    """Of them, those whose first answer the loop's grader failed (they were revised)."""
    fixed: int = 0
    """Of `first_failed`, those whose final answer the audit passed: revising fixed what the grader
    saw, in an independent grader's eyes too."""
    loop_only: int = 0
    """Of `first_failed`, those the loop passed after revising but the audit failed: the revisions
    satisfied the loop's grader only."""

    def add(self, first_passed: bool, row: AuditRow) -> None:
        """Count one audited run whose first answer the loop passed (or not)."""
        audit_passed = row.verdict == "pass"
        self.runs += 1
        self.agreed += first_passed == audit_passed
        if not first_passed:
            self.first_failed += 1
            self.fixed += audit_passed
            self.loop_only += row.loop_passed and not audit_passed

    @property
    def words(self) -> str:
        """The comparison in a few sentences a team lead can repeat; "" when no audited run has both
        verdicts."""
        head = "First grade against the audit (the same runs, so the same requests)"
        if self.runs < MIN_COUNT_FOR_RATE:
            return f"{head}: {plural(self.runs, 'audited run')}: {TOO_FEW}." if self.runs else ""
        agreement = (
            f"The first grade agreed with the audit on {Rate(self.agreed, self.runs).words('audited runs')}."
        )
        failed = f"{head}: of {self.runs} audited runs the loop's first grade failed {self.first_failed}"
        if not self.first_failed:
            return f"{failed}. {agreement}"
        if self.first_failed < MIN_COUNT_FOR_RATE:
            fixed = f"{failed}: {TOO_FEW} what revising did."
        else:
            passed = Rate(self.fixed, self.first_failed).words("revised runs")
            fixed = (
                f"{failed}; at the end the audit passed {passed}: the revisions fixed what the grader "
                "saw, for an independent grader too."
            )
        loop_only = (
            f" The audit still failed {self.loop_only} the loop passed after revising: those revisions "
            "satisfied the loop's grader only."
            if self.loop_only
            else ""
        )
        return f"{fixed}{loop_only} {agreement}"


@dataclass
class AuditFigures:
    """What the audit shows of a channel (or of every channel) over a period."""

    overall: AuditShare = field(default_factory=AuditShare)
    by_iterations: dict[str, IterationBucket] = field(
        default_factory=lambda: {bucket: IterationBucket() for bucket in ITERATION_BUCKETS}
    )
    first_grade: FirstGradeComparison = field(default_factory=FirstGradeComparison)
    audited: int = 0
    """Audits finished, whatever the loop's verdict."""
    errors: int = 0
    """Audits whose grader failed (left out of the shares)."""


def audit_figures(rows: Iterable[AuditRow], graded_runs: Mapping[int, int] | None = None) -> AuditFigures:
    """What the audits `rows` show, beside the runs the loop graded by iterations (`graded_runs`:
    how many runs took each number of iterations)."""
    figures = AuditFigures()
    for iterations, runs in (graded_runs or {}).items():
        figures.by_iterations[iteration_bucket(iterations)].runs += runs
    for row in rows:
        figures.audited += 1
        bucket = figures.by_iterations[iteration_bucket(row.iterations)]
        bucket.audited += 1
        if row.verdict == "error":
            figures.errors += 1
            continue
        if (first := VERDICTS.get(row.first_result or "")) is not None:
            figures.first_grade.add(first == "pass", row)
        if not row.loop_passed:
            continue
        failed = row.verdict == "fail"
        for share in (figures.overall, bucket.share):
            share.passed += 1
            share.failed_by_audit += failed
    return figures


async def load_audit(
    store: Store, *, workspace: Workspace | None, channel: str | None, days: int | None
) -> AuditFigures:
    """What the audit shows of the channel (None: every one) over the last `days` (None: all time)."""
    since = period_start(days)
    rows = await store.audits_in_channel(workspace, channel, since)
    if not rows:
        return AuditFigures()
    return audit_figures(rows, await store.graded_runs_by_iterations(workspace, channel, since))


def audit_lines(figures: AuditFigures) -> list[str]:
    """What the audit shows in words, for the terminal and Slack; nothing when no run was audited."""
    if not figures.audited:
        return []
    per = " · ".join(figures.by_iterations[bucket].words(bucket) for bucket in ITERATION_BUCKETS)
    lines = [
        f"Audit disagreement: of the runs the loop's grader passed, the audit grader failed "
        f"{figures.overall.words}.",
        f"By iterations the run took — {per}.",
        "Harder requests take more iterations, and any two graders disagree more on them, so a share "
        "that rises with iterations does not by itself show the worker learning the grader; comparing "
        "each run's first grade with its audit holds the requests fixed.",
    ]
    if comparison := figures.first_grade.words:
        lines.append(comparison)
    if figures.errors:
        lines.append(f"{figures.errors} audit(s) failed to grade and are left out.")
    return lines


def audit_blocks(figures: AuditFigures) -> list[BlockJson]:
    """What the audit shows as a Slack section; none when no run was audited."""
    lines = audit_lines(figures)
    return block_dicts([section_block("*Audit grader*\n" + "\n".join(lines))]) if lines else []
