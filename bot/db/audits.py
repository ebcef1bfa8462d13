"""The audits of finished runs (`audits`): what the audit grader said of each run's final answer.

`bot.db.store` runs these statements; `bot.audit` decides which runs are audited and reports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from sqlalchemy import Select, Update, and_, bindparam, func, select, update

from bot.db.schema import audits, evaluations, runs
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


class PricedRole(Protocol):
    """The audit grader's tokens priced at its model's rate (`bot.limits.prices.RoleUsage` is one;
    the store keeps what it says with its run's cost)."""

    @property
    def total_tokens(self) -> int:
        """Its input and output tokens."""
        ...

    @property
    def usd(self) -> float | None:
        """What they cost; None when the price table does not know the model."""
        ...

    def model_dump(self, *, mode: Literal["json"]) -> dict[str, Any]:
        """The role's usage as JSON: ``{"model", "input_tokens", …, "usd"}``."""
        ...


@dataclass(frozen=True)
class AuditResult:
    """What the audit grader said, with its provenance and cost."""

    verdict: AuditVerdict
    reason: str
    model: str
    prompt_hash: str | None
    evaluation: dict[str, Any]
    tokens: int | None
    cost: PricedRole | None = None
    """Its tokens priced (None: it reported no usage)."""


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
    first_result: str | None = None
    """What the loop's grader said of the run's first answer (its first iteration's ``result``:
    ``satisfied``, ``needs_revision``, …); None when that iteration's evaluation is not kept."""


FIRST_RESULT = evaluations.c.evaluation["result"].as_string().label("first_result")
"""The loop grader's result on an audited run's first iteration (see `AuditRow.first_result`)."""

AUDIT_COLUMNS = [audits.c[name] for name in AuditRow.__dataclass_fields__ if name in audits.c]
"""The audits columns read into an AuditRow (`FIRST_RESULT` is its run's first evaluation's)."""

FINISH_AUDIT: Update = update(audits).where(audits.c.run_id == bindparam("of_run"))
"""Complete a started audit with its result (parameters: ``of_run`` and the result's columns)."""

ADD_RUN_TOKENS: Update = (
    update(runs)
    .where(runs.c.run_id == bindparam("of_run"))
    .values(
        tokens=func.coalesce(runs.c.tokens, 0) + bindparam("audit_tokens"),
        charged_tokens=runs.c.charged_tokens + bindparam("audit_tokens"),
        charged_usd=runs.c.charged_usd + bindparam("audit_usd"),
    )
)
"""Count an audit's tokens and money with its run's (what it charged the day's budgets included)."""

RUN_COST: Select[Any] = select(runs.c.cost_usd, runs.c.cost_unpriced, runs.c.token_usage).where(
    runs.c.run_id == bindparam("of_run")
)
"""A run's recorded cost, which its audit's adds to (see `with_audit_cost`)."""

SET_RUN_COST: Update = update(runs).where(runs.c.run_id == bindparam("of_run"))
"""Set a run's cost columns (parameters: ``of_run`` and `with_audit_cost`'s columns)."""


def with_audit_cost(recorded: Any, cost: PricedRole) -> dict[str, Any]:
    """The cost columns of a run whose `recorded` cost (a `RUN_COST` row) gains its audit's:
    the audit role beside the run's others in ``token_usage``, its money in ``cost_usd`` (the grader's
    share, ``grader_cost_usd``, stays the loop grader's), and the run partly unpriced when the audit
    model is not in the price table."""
    usage = cost.model_dump(mode="json")
    return {
        "cost_usd": (recorded.cost_usd or 0.0) + (cost.usd or 0.0),
        "cost_unpriced": bool(recorded.cost_unpriced) or cost.usd is None,
        "token_usage": {**(recorded.token_usage or {}), AUDIT_ROLE: usage},
    }


AUDIT_ROLE = "audit"
"""The audit grader's role in a run's ``token_usage`` (`bot.limits.prices.Role`)."""


def finished_audits(conditions: list[Any]) -> Select[Any]:
    """The finished audits matching ``conditions``, oldest first, each with its run's first
    iteration's result."""
    first = and_(evaluations.c.grading_run_id == audits.c.grading_run_id, evaluations.c.iteration == 0)
    return (
        select(*AUDIT_COLUMNS, FIRST_RESULT)
        .select_from(audits.outerjoin(evaluations, first))
        .where(*conditions, audits.c.verdict.is_not(None))
        .order_by(audits.c.created_at, audits.c.run_id)
    )


def graded_runs_by_iterations(conditions: list[Any]) -> Select[Any]:
    """How many graded runs (those with an iteration's evaluation matching ``conditions``) took each
    number of iterations: ``iterations`` and ``runs``."""
    per_run = (
        select(func.count().label("iterations"))
        .where(*conditions)
        .group_by(evaluations.c.grading_run_id)
        .subquery()
    )
    return select(per_run.c.iterations, func.count().label("runs")).group_by(per_run.c.iterations)


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
