"""The audit disagreement: among finished runs the loop's grader passed, the share the audit grader
failed — overall and by the iterations the run took (1, 2, 3+).

A share that rises with iterations is the signature of the worker learning the grader rather than
the rubric: the more rounds of feedback an answer went through, the less an independent grader
agrees that it is done (Pan et al. 2024, "Spontaneous reward hacking in iterative self-refinement").
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.agreement.report import period_start
from bot.db.audits import ITERATION_BUCKETS, AuditRow, iteration_bucket
from bot.db.store import Store
from bot.slack.blocks import block_dicts, section_block
from bot.slack.messages import BlockJson
from bot.vocabulary.workspace import Workspace


@dataclass
class AuditShare:
    """Audits of runs the loop passed: how many, and how many of them the audit grader failed."""

    passed: int = 0
    failed_by_audit: int = 0

    @property
    def words(self) -> str:
        """E.g. ``1 of 4 (25%)``; ``none audited`` for none."""
        if not self.passed:
            return "none audited"
        return f"{self.failed_by_audit} of {self.passed} ({self.failed_by_audit / self.passed:.0%})"


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
        f"By iterations the run took — {per}. A share that rises with iterations means the worker is "
        "learning the grader rather than the rubric.",
    ]
    if figures.errors:
        lines.append(f"{figures.errors} audit(s) failed to grade and are left out.")
    return lines


def audit_blocks(figures: AuditFigures) -> list[BlockJson]:
    """The disagreement as a Slack section; none when no run was audited."""
    lines = audit_lines(figures)
    return block_dicts([section_block("*Audit grader*\n" + "\n".join(lines))]) if lines else []
