"""Long threads stay affordable: past `RUBRIC_BOT_CONTEXT_TOKENS`, older turns are summarized for the worker.

langchain's `SummarizationMiddleware` does the work (when to summarize, what to keep, the summary
call, replacing the older messages in the checkpointed state so the summary is written once, not
every turn). This subclass adds what the bot needs on top: the current request, the material shared
with it and everything after it (the current run's answers and grader feedback) are never
summarized away, the summary records
how many messages it replaced (the grader's transcript counts them as omitted, see `grading.grader`),
and the tokens the summary cost ride on the summary message, so the turn's usage counts them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import SummarizationMiddleware
from langchain.agents.middleware.types import AgentState
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, BaseMessage, UsageMetadata
from langgraph.runtime import Runtime

from grading.grader import SUMMARIZED_COUNT_KEY, is_summary_message, replaced_count, request_index, turn_start

KEEP_SHARE = 2
"""After summarizing, the latest turns kept word for word take at most 1/KEEP_SHARE of the limit:
the rest is room for the summary and the turns that follow before the next summary, so a summary
is written every few turns rather than on every one."""

SUMMARY_USAGE_KEY = "summary_usage"
"""Key of a summary message's `response_metadata` holding the tokens its summary calls spent, per model
(as langchain's usage callback reports them)."""


class ThreadSummary(SummarizationMiddleware):
    """`SummarizationMiddleware` triggered at `context_tokens` of history, written by `summarizer`
    (default: the worker `model`), never cutting into the current request's run."""

    def __init__(
        self, model: BaseChatModel, *, context_tokens: int, summarizer: BaseChatModel | None = None
    ) -> None:
        super().__init__(
            model,
            trigger=("tokens", context_tokens),
            keep=("tokens", max(1, context_tokens // KEEP_SHARE)),
            summarizer=summarizer if summarizer is not None and summarizer is not model else None,
            # The earlier summary opens the part to summarize: trimming it would drop it. That part
            # is below the limit by construction, so it needs no trimming.
            trim_tokens_to_summarize=None,
        )

    def _determine_cutoff_index(self, messages: list[AnyMessage]) -> int:
        cutoff = super()._determine_cutoff_index(messages)
        current = request_index(messages)
        return cutoff if current is None else min(cutoff, turn_start(messages, current))

    async def abefore_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Summarize as langchain does, recording what the summary replaced and cost."""
        before = list(state["messages"])
        with get_usage_metadata_callback() as spent:
            update = await super().abefore_model(state, runtime)
        return _recorded(update, before, spent.usage_metadata)

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """Sync twin of `abefore_model`."""
        before = list(state["messages"])
        with get_usage_metadata_callback() as spent:
            update = super().before_model(state, runtime)
        return _recorded(update, before, spent.usage_metadata)


def _recorded(
    update: dict[str, Any] | None, before: Sequence[AnyMessage], spent: dict[str, UsageMetadata]
) -> dict[str, Any] | None:
    """`update` with its summary message marked with the count it replaced and the usage it cost."""
    if update is None:
        return None
    messages: list[BaseMessage] = update["messages"]
    kept = {message.id for message in messages}
    replaced = sum(replaced_count(m) for m in before if m.id not in kept)
    for message in messages:
        if is_summary_message(message):
            message.additional_kwargs[SUMMARIZED_COUNT_KEY] = replaced
            message.response_metadata[SUMMARY_USAGE_KEY] = dict(spent)
    return update


def summary_usage(messages: Sequence[AnyMessage]) -> list[UsageMetadata]:
    """The tokens spent on the summaries among `messages`."""
    return [
        usage
        for m in messages
        if is_summary_message(m)
        for usage in m.response_metadata.get(SUMMARY_USAGE_KEY, {}).values()
    ]
