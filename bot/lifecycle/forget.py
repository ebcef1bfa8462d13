"""Deleted means gone, edited means changed: a person's deleted or edited message in a thread.

A deleted request leaves the thread's checkpointed conversation with the turn it started (the
answers to it and the grader's feedback, which may quote it); a deleted `rubric:` message takes the
thread's rubric with it when it is still the one in force. The stored evaluations of that request's
run, or graded against that rubric, lose the grader's words. Then the thread keeps only its latest
checkpoint, since every older one still holds the message. An edited request's stored copy takes
the new text the same way (its answers stay: they were right for what was asked then).

These run as jobs in the thread's queue, so they never change a conversation a run is using.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AnyMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent import ConversationAgent, agent_config
from bot.db.store import Store, redacted_evaluation
from bot.threads.conversation import MessageChange, rubric_directive, stored_message_id
from grading.grader import is_summary_message, starts_turn, turn_start

REMOVED_NOTE = "(removed: it may have quoted a message that was deleted)"
"""What replaces the grader's explanation and gaps in an evaluation of a deleted request or rubric."""


async def forget_message(
    agent: ConversationAgent, checkpointer: BaseCheckpointSaver, store: Store, deleted: MessageChange
) -> None:
    """Remove a deleted request (and its turn) or rubric from the thread and the records quoting it."""
    config = agent_config(deleted.thread.thread_id)
    state = (await agent.aget_state(config)).values
    run = await store.request_run(deleted.team, deleted.channel, deleted.ts)
    update = _removal(state, stored_message_id(deleted.channel, deleted.ts), summarized=run is not None)
    rubric = rubric_directive(deleted.text)
    if rubric and state.get("rubric") == rubric:
        update.update(rubric=None, _rubric_active=None)
    if update:
        await agent.aupdate_state(config, update)
        await keep_latest_checkpoint(checkpointer, deleted.thread.thread_id)
    if run is not None:
        await store.redact_run_evaluations(run.run_id, REMOVED_NOTE)
    if rubric:
        await store.redact_rubric(deleted.team, deleted.channel, deleted.thread_ts, rubric, REMOVED_NOTE)


async def revise_request(
    agent: ConversationAgent, checkpointer: BaseCheckpointSaver, edited: MessageChange
) -> None:
    """Give the stored copy of an edited request its new text (no new run)."""
    config = agent_config(edited.thread.thread_id)
    message_id = stored_message_id(edited.channel, edited.ts)
    messages: list[AnyMessage] = (await agent.aget_state(config)).values.get("messages", [])
    stored = next((message for message in messages if message.id == message_id), None)
    if stored is None:
        return  # not a request the bot answered (or summarized already)
    # The stored request is the person's text, then any files read with it: only the text changes.
    text = edited.text
    if edited.previous_text and stored.text.startswith(edited.previous_text):
        text += stored.text[len(edited.previous_text) :]
    # The checkpoint's messages merge by id: the same id replaces the message in place.
    await agent.aupdate_state(config, {"messages": [HumanMessage(text, id=message_id)]})
    await keep_latest_checkpoint(checkpointer, edited.thread.thread_id)


def _removal(state: dict[str, Any], message_id: str, *, summarized: bool) -> dict[str, Any]:
    """The state update removing the message `message_id` and its turn (the material shared with it,
    the answers and the grader's feedback up to the next turn); if it is gone from the messages but
    was a request (`summarized`), the summary that may hold it."""
    messages: list[AnyMessage] = state.get("messages", [])
    ids = [message.id for message in messages]
    if message_id in ids:
        start = ids.index(message_id)
        end = next((i for i in range(start + 1, len(messages)) if starts_turn(messages[i])), len(messages))
        gone = messages[turn_start(messages, start) : end]
    elif summarized:
        gone = [message for message in messages if is_summary_message(message)]
    else:
        return {}
    removed = {message.id for message in gone}
    evaluations = [
        redacted_evaluation(e, REMOVED_NOTE) if e.get("answer_message_id") in removed else e
        for e in state.get("_rubric_evaluations") or []
    ]
    return {"messages": [RemoveMessage(id=str(i)) for i in removed], "_rubric_evaluations": evaluations}


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
