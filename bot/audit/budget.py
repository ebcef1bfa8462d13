"""An audit inside the day's budgets: before the audit grader is called, its estimate is reserved
from the budgets its run spends from (as a run's admission and each replay call reserve theirs); a
budget that refuses it skips the audit, never the run (which has ended); the audit's end settles the
reservation at what the audit grader used, priced at `RUBRIC_BOT_AUDIT_MODEL`'s rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from bot.agreement.replay import CHARS_PER_TOKEN, OUTPUT_TOKENS_PER_CRITERION
from bot.db.spend import QuotaExceeded, RunQuota
from bot.db.store import Store
from bot.limits.prices import estimated_usd
from bot.limits.quota import LimitsOf, day_start
from bot.vocabulary.workspace import Workspace
from grading import RubricEvaluation


def estimated_tokens(evaluations: Sequence[RubricEvaluation], shown: Iterable[str]) -> int:
    """Roughly what the audit grader's call will use: what the loop grader's dearest call on the
    run used (it graded the same rubric, with more in front of it: drafts, feedback, calibration),
    else the characters the audit grader is `shown` as tokens, and its answer's per criterion."""
    used = [evaluation["usage"]["total_tokens"] for evaluation in evaluations if evaluation["usage"]]
    if used:
        return max(used)
    criteria = len(evaluations[-1]["criteria"]) if evaluations else 0
    return sum(map(len, shown)) // CHARS_PER_TOKEN + OUTPUT_TOKENS_PER_CRITERION * criteria


@dataclass(frozen=True)
class AuditBudget:
    """Reserves audits' estimates from the day's budgets (see the module)."""

    store: Store
    model: str
    """The audit model, whose rate prices the estimate."""
    limits: LimitsOf | None = None
    """The daily limits of a workspace (None: nothing caps audits; their spend is counted all the same)."""

    async def reserve(self, run_id: int, workspace: Workspace, tokens: int) -> RunQuota | QuotaExceeded:
        """Reserve `tokens` (and what they cost at the audit model's rate) for the audit of run
        `run_id`: what was reserved, for `finish_audit` to settle, or the cap that refused it
        (nothing reserved: the audit is skipped)."""
        now = datetime.now(UTC)
        quota = (await self.limits(workspace)).quota(now) if self.limits else RunQuota(day_start(now).date())
        quota = replace(quota, estimate=tokens, estimate_usd=estimated_usd(tokens, [self.model]))
        refusal = await self.store.reserve_audit(run_id, quota)
        return quota if refusal is None else refusal
