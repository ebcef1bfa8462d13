"""A small scripted chat model that can answer with text or tool calls.

langchain-core's fakes cannot bind tools, and the grader answers through a
tool call (langchain's tool strategy for structured output), so the tests use
this instead: each call hands the incoming messages to a script function that
returns the reply.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

Script = Callable[[list[BaseMessage]], AIMessage | str]
"""Turns the messages a model receives into its reply."""

_ids = itertools.count()


class ScriptedChatModel(BaseChatModel):
    """A chat model whose replies come from a Python function, recording every call."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    script: Any
    usage: tuple[int, int] | None = (10, 5)
    cached_input: int = 0
    """Of each call's input tokens, how many it reports served from the provider's prompt cache."""
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)
    _tools: list[Any] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._calls

    @property
    def bound_tool_names(self) -> list[str]:
        return [getattr(t, "name", None) or t.get("name") or t["function"]["name"] for t in self._tools]

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self._tools = list(tools)
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self._calls.append(list(messages))
        reply = self.script(list(messages))
        message = AIMessage(content=reply) if isinstance(reply, str) else reply
        if self.usage is not None:
            message.usage_metadata = {
                "input_tokens": self.usage[0],
                "output_tokens": self.usage[1],
                "total_tokens": sum(self.usage),
            }
            if self.cached_input:
                message.usage_metadata["input_token_details"] = {"cache_read": self.cached_input}
        return ChatResult(generations=[ChatGeneration(message=message)])


def answers(*texts: str) -> Script:
    """A worker that gives these answers in turn (repeating the last)."""
    replies = list(texts)

    def script(messages: list[BaseMessage]) -> str:
        return replies.pop(0) if len(replies) > 1 else replies[0]

    return script


def grader_wanting(marker: str) -> Script:
    """A grader of "Names the capital" and "Mentions the river" that fails the river until the
    latest answer contains `marker`."""

    def script(messages: list[BaseMessage]) -> AIMessage:
        latest = payload_of(messages).rsplit("[assistant]", 1)[-1]
        river = marker in latest
        criteria = [
            {"name": "Names the capital", "passed": True},
            {"name": "Mentions the river", "passed": river, "gap": "" if river else "No river named."},
        ]
        result = "satisfied" if river else "needs_revision"
        return grade_call("RubricGrade", {"result": result, "explanation": "Checked.", "criteria": criteria})

    return script


def grade_call(schema: str, grade: dict[str, Any]) -> AIMessage:
    """The grader's structured answer, as a call to the schema's tool."""
    return AIMessage(content="", tool_calls=[{"name": schema, "args": grade, "id": f"call_{next(_ids)}"}])


def tool_call(name: str, args: dict[str, Any]) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{next(_ids)}"}])


def payload_of(messages: list[BaseMessage]) -> str:
    """The grader payload: the first human message the grader received."""
    return next(m.text for m in messages if m.type == "human")
