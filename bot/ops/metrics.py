"""The bot's Prometheus metrics, and `/metrics`.

The runner, the streamed plan, the auditor and the shadow grader move the counters through
`run_finished`, `stream_fell_back`, `audit_finished` and `shadow_graded`; the Slack client counts its
failed calls itself (`bot.slack.client.FAILED_CALLS`: Slack's plumbing sits below ops and imports
nothing of it) on the same registry, so `/metrics` shows that counter too. Each `serve` or `worker`
process keeps its own (Prometheus scrapes every process and adds them up): processes are started
side by side, never forked behind one port, so prometheus_client's multiprocess mode is not needed.
`rubric_bot_queue_jobs` is read from the job queue when scraped; on PostgreSQL every process reports
the same shared queue, so take one process's value, not the sum.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Literal, Protocol

from aiohttp import web
from async_lru import alru_cache
from langchain_core.messages import UsageMetadata
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, Counter, Gauge, Histogram, generate_latest

from bot.db.audits import ITERATION_BUCKETS, AuditVerdict, PricedRole, iteration_bucket
from bot.db.database import DATABASE_ERRORS, describe_database_error
from bot.limits.prices import ROLES, RunCost
from bot.ops.health import PROBE_REUSE_SECONDS
from bot.vocabulary.statuses import RunStatus

logger = logging.getLogger(__name__)

RUN_STATUSES: tuple[RunStatus, ...] = (
    "satisfied",
    "max_iterations_reached",
    "failed",
    "grader_error",
    "answered",
    "error",
    "timed_out",
    "stopped",
)
"""How a run ends: the four grading statuses, ``answered`` (no rubric), ``error`` (the run failed),
``timed_out`` and ``stopped`` (a person stopped it); each is shown from the start, at 0, so a rate
over it is defined before the first."""

RUN_SECONDS_BUCKETS = (1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200)
"""Upper bounds of the run-duration histogram: runs wait on models for seconds to minutes."""

JOB_STATES = ("todo", "doing", "failed", "aborted", "cancelled")
"""The job queue's states (procrastinate's; finished jobs are deleted), each shown even at 0."""

RUNS = Counter("rubric_bot_runs", "Runs finished in this process, by how they ended", ["status"])
GRADER_CALLS = Counter("rubric_bot_grader_calls", "Grader model calls of the runs finished in this process")
TOKENS = Counter(
    "rubric_bot_tokens", "Model tokens (input and output) of finished runs, by model role", ["role"]
)
COST = Counter(
    "rubric_bot_cost_usd",
    "US dollars the finished runs' priced model calls cost (see rubric_bot_unpriced_runs), by model role",
    ["role"],
)
UNPRICED_RUNS = Counter(
    "rubric_bot_unpriced_runs", "Finished runs that used a model the price table does not know"
)
RUN_SECONDS = Histogram(
    "rubric_bot_run_seconds", "Seconds from a run's start to its end", buckets=RUN_SECONDS_BUCKETS
)
QUEUE_JOBS = Gauge("rubric_bot_queue_jobs", "Jobs in the job queue, by state", ["state"])
STREAM_FALLBACKS = Counter(
    "rubric_bot_stream_fallbacks",
    "Runs that went on with plain messages instead of a streamed plan: Slack refused to start the "
    "stream for now (refused_for_now: a rate limit such as chat.startStream's Tier 2, or Slack "
    "unreachable) or for good (refused), or a started stream ended before the answer (ended)",
    ["reason"],
)
StreamFallback = Literal["refused_for_now", "refused", "ended"]
"""Why a run fell back from streaming (see ``rubric_bot_stream_fallbacks``)."""
STREAM_FALLBACK_REASONS: tuple[StreamFallback, ...] = ("refused_for_now", "refused", "ended")
"""Why a run fell back from streaming, each shown from the start at 0."""
AUDITS = Counter(
    "rubric_bot_audit",
    "Finished runs the audit grader graded again: whether it agreed with the loop's grader (agree, "
    "disagree, or error when it failed), how the loop ended (passed or failed) and the run's iterations",
    ["agreement", "loop", "iterations"],
)
AUDITS_SKIPPED = Counter(
    "rubric_bot_audits_skipped",
    "Finished runs chosen for an audit that were not audited: a daily budget they spend from was spent",
)
ShadowOutcome = Literal["graded", "error", "over_budget"]
"""What became of a live iteration chosen for the shadow grader: graded, its grader failed, or a
day's budget refused the call (skipped; the run is never affected)."""
SHADOW_OUTCOMES: tuple[ShadowOutcome, ...] = ("graded", "error", "over_budget")
"""Every shadow outcome, each shown from the start at 0."""
SHADOW_GRADES = Counter(
    "rubric_bot_shadow_grades",
    "Live grader iterations chosen for the shadow grader: graded, error (its grader failed) or "
    "over_budget (a day's budget refused the call)",
    ["outcome"],
)

for _status in RUN_STATUSES:
    RUNS.labels(_status)
for _reason in STREAM_FALLBACK_REASONS:
    STREAM_FALLBACKS.labels(_reason)
for _agreement in ("agree", "disagree"):
    for _bucket in ITERATION_BUCKETS:
        AUDITS.labels(_agreement, "passed", _bucket)
for _outcome in SHADOW_OUTCOMES:
    SHADOW_GRADES.labels(_outcome)
for _role in ROLES:
    TOKENS.labels(_role)
    COST.labels(_role)


class SpentTurn(Protocol):
    """What a run's turn spent, as the counters need it (`bot.agent.turn.TurnOutcome` is one)."""

    @property
    def worker_usage(self) -> UsageMetadata | None: ...

    @property
    def grader_usage(self) -> UsageMetadata | None: ...

    @property
    def summary_usage(self) -> UsageMetadata | None: ...

    @property
    def grader_calls(self) -> int: ...

    @property
    def cost(self) -> RunCost | None: ...


def run_finished(status: RunStatus, seconds: float, outcome: SpentTurn | None = None) -> None:
    """Count a run that ended with `status` after `seconds`; with its turn's `outcome` (a run that got
    one), also the tokens, money and grader calls the turn used."""
    RUNS.labels(status).inc()
    RUN_SECONDS.observe(seconds)
    if outcome is None:
        return
    GRADER_CALLS.inc(outcome.grader_calls)
    spent = (
        ("worker", outcome.worker_usage),
        ("grader", outcome.grader_usage),
        ("summary", outcome.summary_usage),
    )
    for role, usage in spent:
        if usage:
            TOKENS.labels(role).inc(usage["total_tokens"])
    if outcome.cost is not None:
        for role in ROLES:
            COST.labels(role).inc(outcome.cost.role_usd(role))
        if outcome.cost.unpriced:
            UNPRICED_RUNS.inc()


def audit_finished(
    verdict: AuditVerdict, *, loop_passed: bool, iterations: int, cost: PricedRole | None
) -> None:
    """Count an audit that found `verdict` of a run the loop's grader passed (or not) in `iterations`,
    and its tokens and money (`cost`) as the audit role's."""
    agreement = (
        "error" if verdict == "error" else "agree" if (verdict == "pass") == loop_passed else "disagree"
    )
    AUDITS.labels(agreement, "passed" if loop_passed else "failed", iteration_bucket(iterations)).inc()
    if cost is not None:
        TOKENS.labels("audit").inc(cost.total_tokens)
        COST.labels("audit").inc(cost.usd or 0.0)


def audit_skipped() -> None:
    """Count a run chosen for an audit whose audit a spent daily budget skipped."""
    AUDITS_SKIPPED.inc()


def shadow_graded(outcome: ShadowOutcome, usage: PricedRole | None = None) -> None:
    """Count a live iteration the shadow grader graded (or failed to, or the budget kept it from),
    and what it used, as the ``shadow`` role's tokens and money."""
    SHADOW_GRADES.labels(outcome).inc()
    if usage is not None:
        TOKENS.labels("shadow").inc(usage.total_tokens)
        COST.labels("shadow").inc(usage.usd or 0.0)


def stream_fell_back(reason: StreamFallback) -> None:
    """Count a run that fell back from streaming for `reason` (one of `STREAM_FALLBACK_REASONS`)."""
    STREAM_FALLBACKS.labels(reason).inc()


JobCounts = Callable[[], Awaitable[Mapping[str, int] | None]]
"""Reads how many jobs the queue holds per state; None while the queue is not open yet."""


def metrics(
    job_counts: JobCounts, reuse_seconds: float = PROBE_REUSE_SECONDS
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """The `/metrics` handler: the queue's gauge refreshed, then everything in Prometheus's text
    format. One count of the queue serves every scrape that comes at once or within `reuse_seconds`."""
    counts = alru_cache(maxsize=1, ttl=reuse_seconds)(partial(_queue_counts, job_counts))

    async def answer(request: web.Request) -> web.Response:
        _show_queue(await counts())
        return web.Response(body=generate_latest(REGISTRY), headers={"Content-Type": CONTENT_TYPE_LATEST})

    return answer


async def _queue_counts(job_counts: JobCounts) -> Mapping[str, int] | None:
    """The queue's counts; None when they cannot be known (logged if the database did not answer)."""
    try:
        return await job_counts()
    except DATABASE_ERRORS as exc:
        logger.warning("could not count the queue's jobs for /metrics: %s", describe_database_error(exc))
        return None


def _show_queue(counts: Mapping[str, int] | None) -> None:
    """Set the queue's gauge: unknown counts are no series at all, rather than stale ones that look
    current (every state is shown otherwise, 0 included)."""
    QUEUE_JOBS.clear()
    if counts is None:
        return
    for state in {*JOB_STATES, *counts}:
        QUEUE_JOBS.labels(state).set(counts.get(state, 0))
