"""Deleted means gone, edited means changed: a person's deleted or edited message in a thread.

A deleted request leaves the thread's checkpointed conversation with the turn it started (the
answers to it and the grader's feedback, which may quote it); a request already folded into the
summary of older turns (see `bot.agent.summary`) takes that summary with it: the summary's text
gives way to a note saying it was dropped, since it cannot be told apart from what it summarized.
A deleted `rubric:` message takes the thread's rubric with it when it is still the one in force (the
caller tells the thread). A deleted earlier message of the thread, which the bot read as material
when it was called in, leaves that material (its line says `DELETED_LINE`), or the summary holding
it. The stored evaluations of a deleted request's run, or graded against a deleted rubric, lose the
grader's words and the rubric's text. Then the thread keeps only its latest
checkpoint, since every older one still holds the message. An edited request's stored copy takes the
new text the same way (its answers stay: they were right for what was asked then), and a summary
holding the old text is dropped likewise.

These run as jobs in the thread's queue, so they never change a conversation a run is using; a
request still waiting in the queue is taken back or given the new text before it runs (see
`bot.threads.runner`).
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent.worker import ConversationAgent, agent_config
from bot.db.evaluations import redacted_evaluation
from bot.db.store import Store
from bot.lifecycle.files import empty_write_ahead_log
from bot.material.fence import defuse
from bot.material.thread import message_stamp, minute_stamp
from bot.slack.conversation import rubric_directive, stored_message_id
from bot.vocabulary.thread import MessageChange
from grading import RubricEvaluation
from grading.grader import is_material, is_summary_message, starts_turn, turn_start

REMOVED_NOTE = "(removed: it may have quoted a message that was deleted)"
"""What replaces the grader's explanation and gaps in an evaluation of a deleted request or rubric."""

DELETED_LINE = "(a message deleted since)"
"""What an earlier message of the thread the bot read as material says once it is deleted."""

DROPPED_SUMMARY = (
    "(A summary of earlier turns of this thread was here. It was dropped because a message it "
    "covered was deleted or edited; those turns are no longer available.)"
)
"""What a summary of older turns says once a message it covered is deleted or edited: the worker
knows there were earlier turns it can no longer see."""


async def forget_message(
    agent: ConversationAgent, checkpointer: BaseCheckpointSaver, store: Store, deleted: MessageChange
) -> bool:
    """Remove a deleted request (and its turn) or rubric from the thread and the records quoting it;
    whether the thread's rubric in force went with it."""
    config = agent_config(deleted.thread.thread_id)
    state = (await agent.aget_state(config)).values
    run = await store.request_run(deleted.thread.workspace, deleted.channel, deleted.ts)
    graded = await store.redact_run_evaluations(run.run_id, REMOVED_NOTE) if run is not None else set()
    rubric = rubric_directive(deleted.text)
    if rubric:
        graded |= await store.redact_rubric(deleted.thread, rubric, REMOVED_NOTE)
    message_id = stored_message_id(deleted.channel, deleted.ts)
    messages, removed = _removal(state.get("messages", []), message_id, summarized=run is not None)
    if run is None and not rubric:
        earliest = await store.earliest_request_ts(deleted.thread)
        read_before = earliest is not None and Decimal(deleted.ts) < Decimal(earliest)
        messages = _material_removal(state.get("messages", []), deleted, read=read_before)
    update: dict[str, Any] = {}
    if messages:
        update["messages"] = messages
    evaluations: list[RubricEvaluation] = state.get("_rubric_evaluations") or []
    if any(_quotes(e, removed, graded) for e in evaluations):
        update["_rubric_evaluations"] = [
            redacted_evaluation(e, REMOVED_NOTE) if _quotes(e, removed, graded) else e for e in evaluations
        ]
    in_force = bool(rubric) and state.get("rubric") == rubric
    if in_force:
        update.update(rubric=None, _rubric_active=None)
    if update:
        await agent.aupdate_state(config, update)
        await keep_latest_checkpoint(checkpointer, deleted.thread.thread_id)
    await empty_write_ahead_log(checkpointer)
    return in_force


async def revise_request(
    agent: ConversationAgent, checkpointer: BaseCheckpointSaver, store: Store, edited: MessageChange
) -> None:
    """Give the stored copy of an edited request its new text (no new run)."""
    config = agent_config(edited.thread.thread_id)
    message_id = stored_message_id(edited.channel, edited.ts)
    messages: list[AnyMessage] = (await agent.aget_state(config)).values.get("messages", [])
    stored = next((message for message in messages if message.id == message_id), None)
    if stored is None:
        if await store.request_run(edited.thread.workspace, edited.channel, edited.ts) is not None:
            # Answered, so summarized since: the summary may hold the old text.
            await _drop_summaries(agent, checkpointer, edited, messages)
        return  # otherwise not a request the bot answered
    # The stored request is the person's text, then any files read with it: only the text changes.
    text = edited.text
    if edited.previous_text and stored.text.startswith(edited.previous_text):
        text += stored.text[len(edited.previous_text) :]
    # The checkpoint's messages merge by id: the same id replaces the message in place.
    await agent.aupdate_state(config, {"messages": [HumanMessage(text, id=message_id)]})
    await keep_latest_checkpoint(checkpointer, edited.thread.thread_id)
    await empty_write_ahead_log(checkpointer)


async def _drop_summaries(
    agent: ConversationAgent,
    checkpointer: BaseCheckpointSaver,
    edited: MessageChange,
    messages: list[AnyMessage],
) -> None:
    if dropped := dropped_summaries(messages):
        await agent.aupdate_state(agent_config(edited.thread.thread_id), {"messages": dropped})
        await keep_latest_checkpoint(checkpointer, edited.thread.thread_id)
        await empty_write_ahead_log(checkpointer)


def dropped_summaries(messages: list[AnyMessage]) -> list[BaseMessage]:
    """The summaries among `messages`, each saying `DROPPED_SUMMARY` instead (same id, so the
    checkpoint replaces it in place; it still counts the messages it stood for)."""
    return [
        message.model_copy(update={"content": DROPPED_SUMMARY})
        for message in messages
        if is_summary_message(message) and message.content != DROPPED_SUMMARY
    ]


def _removal(
    messages: list[AnyMessage], message_id: str, *, summarized: bool
) -> tuple[list[BaseMessage], set[str]]:
    """The messages update removing the message `message_id` and its turn (the material shared
    with it, the answers and the grader's feedback up to the next turn), and the ids removed; if it
    is gone from the messages but was a request (`summarized`), the summaries that may hold it
    dropped instead."""
    ids = [message.id for message in messages]
    if message_id not in ids:
        return (dropped_summaries(messages) if summarized else []), set()
    start = ids.index(message_id)
    end = next((i for i in range(start + 1, len(messages)) if starts_turn(messages[i])), len(messages))
    removed = {str(message.id) for message in messages[turn_start(messages, start) : end]}
    return [RemoveMessage(id=i) for i in removed], removed


def _material_removal(messages: list[AnyMessage], deleted: MessageChange, *, read: bool) -> list[BaseMessage]:
    """The messages update taking the deleted message out of the thread's earlier messages the bot
    read when it was called in (material: one line per message, see `bot.material.thread`), its
    line saying `DELETED_LINE` instead; if it was `read` but that material has been summarized
    since, the summaries dropped."""
    stamp = message_stamp(deleted.ts)
    line = _material_line(deleted)
    material = [m for m in messages if is_material(m)]
    quoting = [m for m in material if line.search(m.text)]
    if quoting:
        return [
            m.model_copy(update={"content": line.sub(lambda _: f"{stamp} {DELETED_LINE}", m.text)})
            for m in quoting
        ]
    return dropped_summaries(messages) if read and not material else []


_NEXT_LINE = r"(?=\n\[\d{4}-\d\d-\d\d \d\d:\d\d UTC #\d|\n</thread-|\Z)"
"""Where a message's text ends in a thread's material: the next message's stamp, or the block's end."""


def _material_line(deleted: MessageChange) -> re.Pattern[str]:
    """The deleted message's text in a thread's material: from its stamp (which holds its ts) to the
    next message's; or, in material read before stamps held a ts, its minute and its text."""
    by_ts = rf"^{re.escape(message_stamp(deleted.ts))} .*?{_NEXT_LINE}"
    if not deleted.text:
        return re.compile(by_ts, re.DOTALL | re.MULTILINE)
    by_text = rf"\[{re.escape(minute_stamp(deleted.ts))}\] [^\n]*?: {re.escape(defuse(deleted.text))}"
    return re.compile(f"{by_ts}|{by_text}", re.DOTALL | re.MULTILINE)


def _quotes(evaluation: RubricEvaluation, answers: set[str], graded: set[str]) -> bool:
    """Whether the grader's words in `evaluation` may quote what was deleted: it graded one of the
    removed `answers`, or belongs to one of the `graded` runs."""
    return evaluation.get("answer_message_id") in answers or evaluation.get("grading_run_id") in graded


async def keep_latest_checkpoint(checkpointer: BaseCheckpointSaver, key: str) -> None:
    """Delete every checkpoint of the thread but its latest (and their blobs and pending writes):
    an older one still holds what was just removed or replaced."""
    if isinstance(checkpointer, AsyncPostgresSaver):
        await checkpointer.aprune([key], strategy="keep_latest")
        return
    if not isinstance(checkpointer, AsyncSqliteSaver):
        raise TypeError(f"cannot prune checkpoints of a {type(checkpointer).__name__}")
    async with checkpointer.lock, checkpointer.conn.cursor() as cursor:
        for table in ("writes", "checkpoints"):
            latest = (
                "SELECT max(checkpoint_id) FROM checkpoints AS newest WHERE newest.thread_id = "
                f"{table}.thread_id AND newest.checkpoint_ns = {table}.checkpoint_ns"
            )
            await cursor.execute(
                f"DELETE FROM {table} WHERE thread_id = ? AND checkpoint_id <> ({latest})", (key,)
            )
        await checkpointer.conn.commit()
