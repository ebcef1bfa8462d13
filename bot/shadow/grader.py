"""Grading a share of live iterations again with the shadow model, never acting on them.

Once a run has ended (its answer posted, its status recorded), each of its grader iterations that
`is_shadowed` chooses is rebuilt as the live grader saw it — the same rubric, the same draft (the
transcript from the thread's checkpoints) and the same calibration examples (recorded on the
evaluation) — and graded once by the shadow model, as a replay with calibration ``on`` would
(`bot.agreement.replay`). Each call reserves its estimate from the channel's, the workspace's and
the deployment's daily budgets first, and is settled at what it used (`bot.agreement.budget`): a
budget that refuses skips the rest of the run's shadow grades, never the run. The verdicts are kept
with their provenance and cost (`bot.db.shadow`); nothing is posted, and the live verdicts, the
revisions and the run's status stay the live grader's. A failing shadow grader is logged (its
provider's text is not) and its grade kept as ``grader_error``, without verdicts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any, Final

from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.agreement.budget import ReplayBudget
from bot.agreement.replay import Calibration, Case, Regrade, attach_transcripts, regrade
from bot.audit.selection import in_share
from bot.db.evaluations import EvaluationRecord
from bot.db.shadow import ShadowGrade
from bot.db.store import Store
from bot.limits.prices import RoleUsage
from bot.limits.quota import LimitsOf
from bot.ops import metrics
from bot.review.verdicts import grader_verdicts
from bot.vocabulary.thread import ThreadKey
from grading import EVIDENCE_TOOLS, RubricEvaluation, TranscriptGrader

logger = logging.getLogger(__name__)

SELECTION_SALT = "rubric-bot shadow"
"""Hashed with an iteration's ids, so the shadowed iterations are not the audited runs' choice."""

CONCURRENCY = 2
"""Shadow calls one run makes at once: its iterations are few, and the bot's threads share the
provider."""

SAME_INPUT: Final[Calibration] = "on"
"""The shadow grader is shown the calibration examples the live grader was shown."""


def is_shadowed(grading_run_id: str, iteration: int, share: float) -> bool:
    """Whether iteration `iteration` of grading run `grading_run_id` is among the `share` (0 to 1) of
    live iterations the shadow grader grades too: the same choice every time, in every process."""
    return in_share(SELECTION_SALT, f"{grading_run_id}:{iteration}", share)


@dataclass(frozen=True)
class LiveRun:
    """A run that has ended: its thread and the evaluations its live grader made."""

    thread: ThreadKey
    evaluations: Sequence[RubricEvaluation]


class ShadowGrader:
    """Grades `share` of live iterations with `model`, whose model string is `model_name` (see
    `bot.shadow`), within the daily limits `limits` gives (none: counted, never capped)."""

    def __init__(
        self,
        store: Store,
        checkpointer: BaseCheckpointSaver,
        model: str | BaseChatModel,
        model_name: str,
        share: float,
        limits: LimitsOf | None = None,
    ) -> None:
        self._store = store
        self._checkpointer = checkpointer
        self._grader = TranscriptGrader(model, tools=EVIDENCE_TOOLS)
        self._model = model_name
        self._share = share
        self._limits = limits

    def _chosen(self, run: LiveRun) -> list[RubricEvaluation]:
        """The run's evaluations whose iterations the shadow grader grades."""
        return [e for e in run.evaluations if is_shadowed(e["grading_run_id"], e["iteration"], self._share)]

    async def grade(self, run: LiveRun) -> int:
        """Grade the run's chosen iterations not graded before; how many were graded (failed
        grades included, those a budget refused not)."""
        cases = await self._cases(run)
        if not cases:
            return 0
        ready, skipped = await attach_transcripts(self._checkpointer, cases)
        for gone in skipped:
            logger.warning(
                "shadow grade of %s iteration %d skipped: %s",
                gone.record.grading_run_id,
                gone.record.iteration,
                gone.reason,
            )
        quota = (await self._limits(run.thread.workspace)).quota(datetime.now(UTC)) if self._limits else None
        budget = ReplayBudget(self._store, run.thread.workspace, run.thread.channel, self._model, quota)
        graded: list[Regrade] = []
        try:
            await regrade(
                ready,
                self._grader,
                SAME_INPUT,
                self._store,
                concurrency=CONCURRENCY,
                on_graded=graded.append,
                admit=partial(budget.admit, SAME_INPUT),
                settle=partial(self._keep, budget),
            )
        finally:
            await budget.give_back()
        if budget.refused is not None:
            refused = len(ready) - len(graded)
            for _ in range(refused):
                metrics.shadow_graded("over_budget")
            logger.info(
                "%d shadow grade(s) in thread %s skipped: %s", refused, run.thread.thread_id, budget.refused
            )
        return len(graded)

    async def _cases(self, run: LiveRun) -> list[Case]:
        """The run's chosen iterations not graded in the shadow before, as the store recorded them."""
        records: list[EvaluationRecord] = []
        done: dict[str, set[int]] = {}
        for evaluation in self._chosen(run):
            run_id, iteration = evaluation["grading_run_id"], evaluation["iteration"]
            if run_id not in done:
                done[run_id] = await self._store.shadowed_iterations(run_id)
            if iteration in done[run_id]:
                continue
            record = await self._store.get_evaluation(run.thread.workspace, run_id, iteration)
            if record is not None:  # an evaluation never posted has nothing to compare with
                records.append(record)
        return [Case(record, ()) for record in records]

    async def _keep(self, budget: ReplayBudget, graded: Regrade) -> None:
        """Settle the call's spend and keep its grade; count it."""
        spent = await budget.charge_used(SAME_INPUT, graded)
        await self._store.record_shadow_grade(_grade(graded, self._model, spent))
        if graded.error is not None:
            logger.warning(
                "shadow grade of %s iteration %d: the shadow grader failed (kept as grader_error)",
                graded.case.record.grading_run_id,
                graded.case.record.iteration,
            )
        metrics.shadow_graded("error" if graded.error is not None else "graded", spent)


def _grade(graded: Regrade, asked: str, spent: RoleUsage) -> ShadowGrade:
    """The shadow grade of a regraded live iteration, with its provenance and what it used."""
    record = graded.case.record
    provenance: Mapping[str, Any] = graded.evaluation.get("provenance") or {}
    return ShadowGrade(
        thread=record.thread,
        grading_run_id=record.grading_run_id,
        iteration=record.iteration,
        model=provenance.get("grader_model") or asked,
        prompt_hash=provenance.get("grader_prompt_hash"),
        result=graded.evaluation["result"],
        evaluation=dict(graded.evaluation),
        tokens=spent.total_tokens,
        usd=spent.usd,
        verdicts={} if graded.error is not None else dict(graded.verdicts),
        live_verdicts=dict(grader_verdicts(record.evaluation)),
    )
