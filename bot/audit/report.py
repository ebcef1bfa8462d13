"""The audit disagreement: among finished runs the loop's grader passed, the share the audit grader
failed — overall and by the iterations the run took (1, 2, 3+).

A share that rises with iterations can be the worker learning the grader rather than the rubric
(Pan et al. 2024, "Spontaneous reward hacking in iterative self-refinement"), but runs that take more
iterations are also the harder requests, so the report says so rather than read it as drift. Every
share is said with its count and 95 % interval, and only from `MIN_COUNT_FOR_RATE` audits on.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.agreement.report import period_start
from bot.db.audits import ITERATION_BUCKETS, AuditRow, iteration_bucket
from bot.db.store import Store
from bot.feedback.satisfaction import MIN_COUNT_FOR_RATE, Rate
from bot.slack.blocks import block_dicts, plural, section_block
from bot.slack.messages import BlockJson
from bot.vocabulary.workspace import Workspace


@dataclass
class AuditShare:
    """Audits of runs the loop passed: how many, and how many of them the audit grader failed."""

    passed: int = 0
    failed_by_audit: int = 0

    @property
    def words(self) -> str:
        """E.g. ``6 of 40 audited: 15% (95% CI 7–29%)``; under `MIN_COUNT_FOR_RATE` audits only
        how many, as too few to read; ``none audited`` for none."""
        if not self.passed:
            return "none audited"
        if self.passed < MIN_COUNT_FOR_RATE:
            return f"{plural(self.passed, 'audit')}: too few audits to read"
        return Rate(self.failed_by_audit, self.passed).words("audited")


@dataclass
class AuditFigures:
    """The audit disagreement of a channel (or of every channel) over a period."""

    overall: AuditShare = field(default_factory=AuditShare)
    by_iterations: dict[str, AuditShare] = field(
        default_factory=lambda: {bucket: AuditShare() for bucket in ITERATION_BUCKETS}
    )
    audited: int = 0
    """Audits finished, whatever the loop's verdict."""
    errors: int = 0
    """Audits whose grader failed (left out of the shares)."""


def audit_figures(rows: Iterable[AuditRow]) -> AuditFigures:
    """The audit disagreement over `rows`."""
    figures = AuditFigures()
    for row in rows:
        figures.audited += 1
        if row.verdict == "error":
            figures.errors += 1
            continue
        if not row.loop_passed:
            continue
        failed = row.verdict == "fail"
        for share in (figures.overall, figures.by_iterations[iteration_bucket(row.iterations)]):
            share.passed += 1
            share.failed_by_audit += failed
    return figures


async def load_audit(
    store: Store, *, workspace: Workspace | None, channel: str | None, days: int | None
) -> AuditFigures:
    """The audit disagreement of the channel (None: every one) over the last `days` (None: all time)."""
    return audit_figures(await store.audits_in_channel(workspace, channel, period_start(days)))


def audit_lines(figures: AuditFigures) -> list[str]:
    """The disagreement in words, for the terminal and Slack; nothing when no run was audited."""
    if not figures.audited:
        return []
    per = " · ".join(
        f"{bucket} iteration{'s' if bucket != '1' else ''}: {figures.by_iterations[bucket].words}"
        for bucket in ITERATION_BUCKETS
    )
    lines = [
        f"Audit disagreement: of the runs the loop's grader passed, the audit grader failed "
        f"{figures.overall.words}.",
        f"By iterations the run took — {per}. Runs that take more iterations are the harder requests, "
        "so a share that rises with iterations does not by itself show the worker learning the grader.",
    ]
    if figures.errors:
        lines.append(f"{figures.errors} audit(s) failed to grade and are left out.")
    return lines


def audit_blocks(figures: AuditFigures) -> list[BlockJson]:
    """The disagreement as a Slack section; none when no run was audited."""
    lines = audit_lines(figures)
    return block_dicts([section_block("*Audit grader*\n" + "\n".join(lines))]) if lines else []
