"""The reviewed cases as JSON Lines rows, one per (iteration, criterion), streamed.

Evaluations are read from the store in batches and each thread's conversation from its latest
checkpoint (a few threads kept at a time), so memory stays bounded however much is exported. What
people deleted is gone from the conversation: an iteration whose request or answer is no longer
there is left out, and purged threads have no evaluations left to export. Each row carries its run's
recorded cost (`ExportedCost`: money, the models not priced, tokens per role), read with the
evaluations in the same batches.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Literal, NamedTuple, TypedDict

from langchain_core.messages import AIMessage, AnyMessage
from langgraph.checkpoint.base import BaseCheckpointSaver

from bot.audit.export import ExportedAudit, audits_by_run, exported_audit
from bot.db.audits import AuditRow
from bot.db.evaluations import EvaluationRecord, RecordedCost
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.limits.prices import Role, RunCost
from bot.review.verdicts import grader_verdicts
from bot.slack.conversation import stored_message_id
from bot.vocabulary.provenance import UNKNOWN
from bot.vocabulary.verdicts import Verdict
from bot.vocabulary.workspace import Tenant
from grading.grader import is_request_message

THREADS_KEPT = 8
"""Conversations kept read at a time: an export walks evaluations in time order, so a thread's
iterations come close together."""


class ReviewEntry(TypedDict):
    """One person's review of the criterion."""

    reviewer: str
    verdict: str
    """``pass`` or ``fail`` (a scored dimension's 1–5 score, as text)."""
    comment: str
    at: str
    """When, ISO 8601 in UTC."""


class RoleTokens(TypedDict):
    """One role's tokens in the run, as the provider reported them (see `bot.limits.prices.RoleUsage`)."""

    model: str
    input_tokens: int
    """All input tokens, cached ones included."""
    cached_input_tokens: int
    cache_write_tokens: int
    output_tokens: int


class ExportedCost(TypedDict):
    """What the run the row belongs to cost, at the list prices of the bundled price table."""

    usd: float | None
    """US dollars; None when a model the run used is not in the price table (see `unpriced`)."""
    unpriced: list[str]
    """The models the price table does not know (empty: `usd` is the whole cost)."""
    tokens: dict[Role, RoleTokens]
    """Its tokens per role (``worker``, ``grader``, ``summary``, ``audit``), so it can be priced again."""


class FeedbackEntry(TypedDict):
    """One person's 👍/👎 on the run's final answer (`bot.feedback`): a verdict on the answer, not a
    review of the grader."""

    person: str
    vote: Literal["up", "down"]
    at: str
    """When, ISO 8601 in UTC (their last click)."""


class DatasetRow(TypedDict):
    """One exported (iteration, criterion); the README lists what each key means."""

    workspace: str
    channel: str
    thread_ts: str
    run_id: str
    iteration: int
    criterion: str
    request: str
    answer: str
    grader_verdict: Verdict
    """A list criterion's ``pass``/``fail``/``cannot_tell``; a scored dimension's 1–5 score as text (as
    its reviews' verdicts are), so weighted κ can be recomputed from the export."""
    grader_reason: str
    confidence: float
    """Share of the grader's samples that gave `grader_verdict` (1 with one sample, and on rows graded
    before samples were counted); 1 too for a verdict the escalation model gave."""
    samples: int
    """Times the grader was asked for this iteration (``RUBRIC_BOT_GRADER_SAMPLES``)."""
    escalated: bool
    """Whether `grader_verdict` is the escalation model's (``RUBRIC_BOT_ESCALATION_MODEL``)."""
    rubric_version: str
    grader_model: str
    grader_prompt_hash: str
    worker_model: str
    calibration_examples: list[str]
    reviews: list[ReviewEntry]
    audit: ExportedAudit | None
    cost: ExportedCost | None
    """The whole run's cost (the same on each of its rows); None when it was not recorded."""
    asker_feedback: list[FeedbackEntry]
    """People's 👍/👎 on the run's final answer (the same on each of its rows; empty: none)."""


async def dataset_rows(
    store: Store,
    checkpointer: BaseCheckpointSaver,
    *,
    workspace: Tenant | None,
    channel: str | None,
    since: datetime | None,
    reviewed_only: bool,
) -> AsyncIterator[DatasetRow]:
    """The rows of the evaluations in scope, oldest first."""
    conversations: OrderedDict[str, list[AnyMessage]] = OrderedDict()
    audits = await audits_by_run(store, workspace, channel, since)
    votes: dict[str, list[FeedbackEntry]] = {}
    for vote in await store.exported_feedback(workspace, channel, since):
        votes.setdefault(vote.grading_run_id, []).append(
            FeedbackEntry(person=vote.person, vote="up" if vote.positive else "down", at=vote.at.isoformat())
        )
    deleted = await _deletions_queued(store)
    async for record in store.evaluation_records(workspace, channel, since, with_cost=True):
        reviews = await store.reviews_for_iteration(
            record.thread.workspace, record.grading_run_id, record.iteration
        )
        if reviewed_only and not reviews:
            continue
        messages = await _conversation(checkpointer, record.thread.thread_id, conversations)
        case = _request_and_answer(messages, record.evaluation["answer_message_id"])
        if case is None or (record.thread.thread_id, case.request_id) in deleted:
            continue  # deleted since (or its deletion still queued): what was deleted is never exported
        for row in _rows(record, case, reviews, audits, votes.get(record.grading_run_id, [])):
            if not reviewed_only or row["reviews"]:
                yield row


def jsonl(row: DatasetRow) -> str:
    """One row as a JSON Lines line (UTF-8 kept as written)."""
    return json.dumps(row, ensure_ascii=False) + "\n"


async def _conversation(
    checkpointer: BaseCheckpointSaver, thread_id: str, kept: OrderedDict[str, list[AnyMessage]]
) -> list[AnyMessage]:
    if thread_id in kept:
        kept.move_to_end(thread_id)
        return kept[thread_id]
    saved = await checkpointer.aget_tuple({"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}})
    messages = list(saved.checkpoint["channel_values"].get("messages", [])) if saved else []
    kept[thread_id] = messages
    if len(kept) > THREADS_KEPT:
        kept.popitem(last=False)
    return messages


class Case(NamedTuple):
    """A graded answer and the request it answered, as the conversation keeps them."""

    request: str
    answer: str
    request_id: str | None
    """The request's message id in the conversation (see `stored_message_id`)."""


async def _deletions_queued(store: Store) -> set[tuple[str, str]]:
    """The messages whose deletion Slack reported but the bot has not applied yet, each as its
    thread's id and its id in the conversation: the export leaves them out as if it had."""
    return {
        (pending.change.thread.thread_id, stored_message_id(pending.change.channel, pending.change.ts))
        for pending in await store.pending_changes()
        if pending.kind == "forget"
    }


def _request_and_answer(messages: Sequence[AnyMessage], answer_id: str | None) -> Case | None:
    """The graded answer and the request it answered, or None when either is gone."""
    index = next((i for i, m in enumerate(messages) if m.id == answer_id and isinstance(m, AIMessage)), None)
    if index is None:
        return None
    request = next((m for m in reversed(messages[:index]) if is_request_message(m)), None)
    if request is None:
        return None
    return Case(request.text, messages[index].text, request.id)


def _rows(
    record: EvaluationRecord,
    case: Case,
    reviews: Sequence[ReviewRow],
    audits: dict[str, AuditRow],
    votes: list[FeedbackEntry],
) -> list[DatasetRow]:
    request, answer = case.request, case.answer
    provenance = record.provenance
    verdicts = grader_verdicts(record.evaluation)
    graded = {c["name"]: c for c in record.evaluation["criteria"]}
    cost = exported_cost(record.run_cost)
    rows = []
    for name, verdict in verdicts.items():
        criterion = graded.get(name)
        rows.append(
            DatasetRow(
                workspace=record.team,
                channel=record.channel,
                thread_ts=record.thread_ts,
                run_id=record.grading_run_id,
                iteration=record.iteration,
                criterion=name,
                request=request,
                answer=answer,
                grader_verdict=verdict,
                grader_reason=criterion["gap"] if criterion else "",
                confidence=criterion.get("confidence", 1.0) if criterion else 1.0,
                samples=provenance["samples"] if provenance else 1,
                escalated=bool(criterion and criterion.get("escalated")),
                rubric_version=provenance["rubric_version"] if provenance else UNKNOWN,
                grader_model=provenance["grader_model"] if provenance else UNKNOWN,
                grader_prompt_hash=provenance["grader_prompt_hash"] if provenance else UNKNOWN,
                worker_model=provenance["worker_model"] if provenance else UNKNOWN,
                calibration_examples=provenance["calibration_examples"] if provenance else [],
                reviews=[
                    ReviewEntry(
                        reviewer=r.reviewer,
                        verdict=r.reviewer_verdict,
                        comment=r.comment,
                        at=r.created_at.isoformat(),
                    )
                    for r in reviews
                    if r.criterion == name
                ],
                audit=exported_audit(audits, record.grading_run_id, record.iteration),
                cost=cost,
                asker_feedback=votes,
            )
        )
    return rows


def exported_cost(recorded: RecordedCost | None) -> ExportedCost | None:
    """A run's recorded cost as a row carries it: its money (None when partly unpriced: never a
    made-up total), the models not priced, and its tokens per role; None when it was not recorded."""
    if recorded is None:
        return None
    cost = RunCost.model_validate({"roles": recorded.token_usage})
    unpriced = cost.unpriced
    return ExportedCost(
        usd=None if recorded.unpriced or unpriced else recorded.usd,
        unpriced=unpriced,
        tokens={
            role: RoleTokens(
                model=usage.model,
                input_tokens=usage.input_tokens,
                cached_input_tokens=usage.cached_input_tokens,
                cache_write_tokens=usage.cache_write_tokens,
                output_tokens=usage.output_tokens,
            )
            for role, usage in cost.roles.items()
        },
    )
