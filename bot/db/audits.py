"""The audits of finished runs (`audits`): what the audit grader said of each run's final answer.

`bot.db.store` runs these statements; `bot.audit` decides which runs are audited and reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Select, Update, bindparam, func, select, update

from bot.db.schema import audits, runs
from bot.vocabulary.workspace import NO_ENTERPRISE

AuditVerdict = Literal["pass", "fail", "error"]
"""What the audit grader said of a final answer: every judged criterion passes, some fails, or the
audit grader failed (its error is the reason)."""


@dataclass(frozen=True)
class AuditStart:
    """A finished run about to be audited: where it is and how the loop's grader ended it."""

    run_id: int
    team: str
    channel: str
    thread_ts: str
    grading_run_id: str
    iterations: int
    loop_passed: bool
    model: str
    """The audit model as asked for; replaced by the model as it answered once it has."""
    enterprise: str = NO_ENTERPRISE


@dataclass(frozen=True)
class AuditResult:
    """What the audit grader said, with its provenance and cost."""

    verdict: AuditVerdict
    reason: str
    model: str
    prompt_hash: str | None
    evaluation: dict[str, Any]
    tokens: int | None


@dataclass(frozen=True)
class AuditRow:
    """One finished audit, as reports and the export read it."""

    run_id: int
    team: str
    channel: str
    thread_ts: str
    grading_run_id: str
    iterations: int
    loop_passed: bool
    model: str
    verdict: AuditVerdict
    reason: str
    created_at: datetime
    enterprise: str = NO_ENTERPRISE


AUDIT_COLUMNS = [audits.c[name] for name in AuditRow.__dataclass_fields__]
"""The audits columns read into an AuditRow."""

FINISH_AUDIT: Update = update(audits).where(audits.c.run_id == bindparam("of_run"))
"""Complete a started audit with its result (parameters: ``of_run`` and the result's columns)."""

ADD_RUN_TOKENS: Update = (
    update(runs)
    .where(runs.c.run_id == bindparam("of_run"))
    .values(
        tokens=func.coalesce(runs.c.tokens, 0) + bindparam("audit_tokens"),
        charged_tokens=runs.c.charged_tokens + bindparam("audit_tokens"),
    )
)
"""Count an audit's tokens with its run's (those it charged the day's budgets included)."""


def finished_audits(conditions: list[Any]) -> Select[Any]:
    """The finished audits matching ``conditions``, oldest first."""
    return (
        select(*AUDIT_COLUMNS)
        .where(*conditions, audits.c.verdict.is_not(None))
        .order_by(audits.c.created_at, audits.c.run_id)
    )


def result_values(result: AuditResult) -> dict[str, Any]:
    """The columns an audit's result sets."""
    return {
        "verdict": result.verdict,
        "reason": result.reason,
        "model": result.model,
        "prompt_hash": result.prompt_hash,
        "evaluation": result.evaluation,
        "tokens": result.tokens,
    }


ITERATION_BUCKETS = ("1", "2", "3+")
"""How audits are grouped by the iterations their run took: drift shows as a rising disagreement."""


def iteration_bucket(iterations: int) -> str:
    """The bucket of `ITERATION_BUCKETS` a run of `iterations` iterations falls in."""
    return ITERATION_BUCKETS[min(iterations, len(ITERATION_BUCKETS)) - 1]
