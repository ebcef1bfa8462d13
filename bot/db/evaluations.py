"""The evaluation messages the bot posted, with what they graded against; and their redaction when
what they quote is deleted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import and_, bindparam, select, tuple_, update
from sqlalchemy.dialects import postgresql, sqlite

from bot.db.base import StoreBase
from bot.db.schema import evaluations, posted, runs
from bot.db.scope import in_scope, in_thread, in_workspace, of_iteration, thread_columns, utc_now
from bot.vocabulary.provenance import EvaluationProvenance, read_provenance
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import NO_ENTERPRISE, Tenant, Workspace
from grading import RubricEvaluation

EVALUATION_DEFAULTS: dict[str, Any] = {"unmatched": [], "grader_calls": 0}
"""Values of the evaluation keys that grading added after the bot began storing evaluations:
an evaluation stored before them reads as if the grader flagged nothing and made no count."""


@dataclass(frozen=True)
class RecordedCost:
    """What the run that posted an evaluation cost, as its end recorded it (see `bot.db.schema.runs`)."""

    usd: float
    """US dollars of its priced model calls."""
    unpriced: bool
    """Whether a model it used is not in the price table (`usd` leaves its tokens out)."""
    token_usage: dict[str, Any]
    """Its tokens per role as stored (``runs.token_usage``; `bot.limits.prices.RunCost` reads it)."""


@dataclass(frozen=True)
class EvaluationRecord:
    """An evaluation message the bot posted, with what it graded against."""

    grading_run_id: str
    iteration: int
    team: str
    channel: str
    thread_ts: str
    message_ts: str
    evaluation: RubricEvaluation
    rubric_text: str
    created_at: datetime
    enterprise: str = NO_ENTERPRISE
    provenance: EvaluationProvenance | None = None
    """What produced the evaluation (see `bot.vocabulary.provenance`); every field UNKNOWN when
    stored before provenance was kept."""
    run_cost: RecordedCost | None = None
    """What the run that posted it cost, when asked for (see `EvaluationStore.evaluation_records`);
    None too when its run has not ended or ended before costs were kept."""

    @property
    def thread(self) -> ThreadKey:
        """The thread the evaluation message is in."""
        return ThreadKey(self.team, self.channel, self.thread_ts, self.enterprise)


@dataclass(frozen=True)
class PostedEvaluation:
    """The evaluation a thread message shows, recorded with the message's ledger entry (for reviews)."""

    thread: ThreadKey
    evaluation: RubricEvaluation
    rubric_text: str
    """The rubric the evaluation graded against."""
    provenance: EvaluationProvenance | None = None
    """What produced the evaluation, stored with it."""


EXPORT_BATCH = 500
"""Evaluations read per query when they are walked in order (`EvaluationStore.evaluation_records`)."""

_EVALUATION_COLUMNS = [
    evaluations.c[name] for name in EvaluationRecord.__dataclass_fields__ if name in evaluations.c
]
"""The evaluations columns read into an EvaluationRecord."""

_RUN_OF_MESSAGE = (
    select(
        posted.c.message_ts,
        runs.c.team,
        runs.c.channel,
        runs.c.cost_usd,
        runs.c.cost_unpriced,
        runs.c.token_usage,
    )
    .join_from(posted, runs, posted.c.run_id == runs.c.run_id)
    .subquery("run_of_message")
)
"""The run that posted each message, with its recorded cost."""

_RUN_COST_COLUMNS = (
    _RUN_OF_MESSAGE.c.cost_usd.label("run_cost_usd"),
    _RUN_OF_MESSAGE.c.cost_unpriced.label("run_cost_unpriced"),
    _RUN_OF_MESSAGE.c.token_usage.label("run_token_usage"),
)
"""An evaluation's run's cost, as an export reads it beside the evaluation."""

_RUN_COST_NAMES = frozenset(column.name for column in _RUN_COST_COLUMNS)
"""The names those columns are read under."""

_WITH_RUN = evaluations.outerjoin(
    _RUN_OF_MESSAGE,
    and_(
        _RUN_OF_MESSAGE.c.message_ts == evaluations.c.message_ts,
        _RUN_OF_MESSAGE.c.team == evaluations.c.team,
        _RUN_OF_MESSAGE.c.channel == evaluations.c.channel,
    ),
)
"""Each evaluation with the run that posted its message, if the ledger has it."""


class EvaluationStore(StoreBase):
    """The evaluations posted, by grading run and iteration."""

    async def save_evaluation(
        self, thread: ThreadKey, message_ts: str, evaluation: RubricEvaluation, rubric_text: str
    ) -> None:
        """Remember an evaluation message posted in the thread, keyed by its grading run id and iteration."""
        row = evaluation_row(message_ts, PostedEvaluation(thread, evaluation, rubric_text))
        async with self._write() as connection:
            await connection.execute(evaluation_upsert(self._postgres), row)

    async def get_evaluation(
        self, workspace: Workspace, grading_run_id: str, iteration: int
    ) -> EvaluationRecord | None:
        """An evaluation posted in the workspace, by grading run id and iteration, or None (also when
        the ids name another workspace's: a button's value is the clicker's to forge)."""
        query = select(*_EVALUATION_COLUMNS).where(
            *in_workspace(evaluations, workspace), of_iteration(evaluations, grading_run_id, iteration)
        )
        rows = await self._rows(query)
        return _evaluation_record(rows[0]) if rows else None

    async def evaluation_records(
        self,
        workspace: Tenant | None,
        channel: str | None,
        since: datetime | None = None,
        *,
        with_cost: bool = False,
    ) -> AsyncIterator[EvaluationRecord]:
        """The evaluations posted in a channel (None: any) from ``since`` on, with their provenance
        (and `with_cost`, their run's recorded cost), oldest first; read EXPORT_BATCH at a time, so a
        long history never sits in memory whole and the caller may use the store between batches."""
        table = evaluations
        order = (table.c.created_at, table.c.grading_run_id, table.c.iteration)
        query = select(*_EVALUATION_COLUMNS).where(*in_scope(table, workspace, channel, since))
        if with_cost:
            query = query.add_columns(*_RUN_COST_COLUMNS).select_from(_WITH_RUN)
        after: tuple[Any, ...] | None = None
        while True:
            batch = query
            if after is not None:
                typed = (
                    bindparam(None, value, type_=column.type)
                    for column, value in zip(order, after, strict=True)
                )
                batch = query.where(tuple_(*order) > tuple_(*typed))
            rows = await self._rows(batch.order_by(*order).limit(EXPORT_BATCH))
            for row in rows:
                yield _evaluation_record(row)
            if len(rows) < EXPORT_BATCH:
                return
            last = rows[-1]
            after = (last["created_at"], last["grading_run_id"], last["iteration"])

    async def evaluations_in_channel(
        self, workspace: Workspace | None, channel: str | None, since: datetime | None = None
    ) -> list[RubricEvaluation]:
        """The evaluations posted in a channel, oldest first; only those from ``since`` on if given.

        ``None`` for ``workspace`` or ``channel`` matches every one (the terminal report may span them).
        """
        table = evaluations
        query = (
            select(table.c.evaluation)
            .where(*in_scope(table, workspace, channel, since))
            .order_by(table.c.created_at, table.c.grading_run_id, table.c.iteration)
        )
        return [_stored_evaluation(row["evaluation"]) for row in await self._rows(query)]

    async def redact_run_evaluations(self, run_id: int, note: str) -> set[str]:
        """Replace the grader's words (explanation, gaps) in the run's stored evaluations with
        ``note``, keeping the verdicts; the grading runs they belong to."""
        posted_ts = select(posted.c.message_ts).where(posted.c.run_id == run_id)
        return await self._redact_evaluations(evaluations.c.message_ts.in_(posted_ts), note)

    async def redact_rubric(self, thread: ThreadKey, rubric_text: str, note: str) -> set[str]:
        """Replace ``rubric_text`` where the thread's stored evaluations quote it (their rubric, and
        the grader's words about it) with ``note``; the grading runs they belong to."""
        return await self._redact_evaluations(
            and_(*in_thread(evaluations, thread), evaluations.c.rubric_text == rubric_text),
            note,
            rubric=True,
        )

    async def _redact_evaluations(self, condition: Any, note: str, *, rubric: bool = False) -> set[str]:
        query = select(evaluations.c.grading_run_id, evaluations.c.iteration, evaluations.c.evaluation)
        async with self._write() as connection:
            found = list((await connection.execute(query.where(condition))).mappings())
            for row in found:
                values: dict[str, Any] = {"evaluation": redacted_evaluation(row["evaluation"], note)}
                if rubric:
                    values["rubric_text"] = note
                where = of_iteration(evaluations, row["grading_run_id"], row["iteration"])
                await connection.execute(update(evaluations).where(where).values(**values))
        return {row["grading_run_id"] for row in found}


def evaluation_row(message_ts: str, shown: PostedEvaluation) -> dict[str, Any]:
    """The evaluations row of an evaluation message."""
    evaluation = shown.evaluation
    return {
        "grading_run_id": evaluation["grading_run_id"],
        "iteration": evaluation["iteration"],
        "created_at": utc_now(),
        **thread_columns(shown.thread),
        "message_ts": message_ts,
        "evaluation": evaluation,
        "rubric_text": shown.rubric_text,
        "provenance": shown.provenance,
    }


@cache
def evaluation_upsert(postgres: bool) -> Any:
    """Remember an evaluation message (`evaluation_row`), replacing one of the same iteration. Built
    once per dialect."""
    upsert = (postgresql.insert if postgres else sqlite.insert)(evaluations)
    return upsert.on_conflict_do_update(
        index_elements=["grading_run_id", "iteration"],
        set_={name: upsert.excluded[name] for name in _EVALUATION_REPLACED},
    )


def _evaluation_record(row: Any) -> EvaluationRecord:
    """An evaluations row as its record: the document typed, the provenance read (UNKNOWN where
    missing), its run's cost if the row has it."""
    columns = {name: value for name, value in row.items() if name not in _RUN_COST_NAMES}
    return EvaluationRecord(
        **{
            **columns,
            "evaluation": _stored_evaluation(row["evaluation"]),
            "provenance": read_provenance(row["provenance"]),
            "run_cost": _recorded_cost(row),
        }
    )


def _recorded_cost(row: Any) -> RecordedCost | None:
    """The run's cost an evaluation row was read with; None without one."""
    if row.get("run_cost_usd") is None:
        return None
    return RecordedCost(
        usd=float(row["run_cost_usd"]),
        unpriced=bool(row["run_cost_unpriced"]),
        token_usage=row["run_token_usage"] or {},
    )


def _stored_evaluation(document: dict[str, Any]) -> RubricEvaluation:
    """A stored evaluation as the typed RubricEvaluation, keys added since it was stored filled in."""
    return cast(RubricEvaluation, {**EVALUATION_DEFAULTS, **document})


def redacted_evaluation(evaluation: RubricEvaluation | dict[str, Any], note: str) -> RubricEvaluation:
    """``evaluation`` with the grader's words (its explanation and each item's gap) replaced by
    ``note``: they may quote what was deleted. Verdicts and scores stay, for the agreement figures."""

    def blank(items: Any) -> list[Any]:
        return [{**item, "gap": note if item.get("gap") else ""} for item in items or []]

    document = dict(evaluation)
    document.update(
        explanation=note, criteria=blank(document.get("criteria")), unmatched=blank(document.get("unmatched"))
    )
    return cast(RubricEvaluation, document)


_EVALUATION_REPLACED = (
    "enterprise",
    "team",
    "channel",
    "thread_ts",
    "message_ts",
    "evaluation",
    "rubric_text",
    "provenance",
)
"""What a repeated evaluation message replaces of the one recorded before."""
