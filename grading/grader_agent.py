"""The grader sub-agent, with its model calls metered per iteration.

One grading iteration may take several grader model calls: evidence-tool rounds, langchain's
re-asks of an answer that fails the schema, and the middleware's own re-ask for criteria the
answer skipped. Every one of them goes through :class:`GraderMeter`, which counts it against the
iteration's budget (so a grader that keeps answering unusably costs a bounded amount) and sums
its tokens with langchain-core's `add_usage`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, UsageMetadata
from langchain_core.messages.ai import add_usage
from langchain_core.tools import BaseTool
from pydantic import BaseModel

from grading.caching import PromptCaching, payload_message
from grading.grader import GRADER_SOURCE, GraderPayload
from grading.provenance import answered_model


class GraderError(RuntimeError):
    """The grader's answer was unusable (no structured answer, criteria missing, budget spent)."""


class GraderBudgetSpent(GraderError):
    """The grader used every model call its iteration allows without a usable answer."""


class NoStructuredAnswer(GraderError):
    """The grader ended its turn without answering in the schema (plain text, say)."""


@dataclass
class GraderMeter:
    """One iteration's grader model calls: how many are allowed, how many were made, their tokens."""

    limit: int
    calls: int = 0
    usage: UsageMetadata | None = None
    model: str | None = None
    """The model that answered the latest call, as the provider named it (None until one did)."""

    @property
    def left(self) -> int:
        """Model calls the iteration may still make."""
        return self.limit - self.calls

    def spend(self) -> None:
        """Count one more model call, or raise `GraderBudgetSpent` when none is left."""
        if self.left < 1:
            raise self.spent()
        self.calls += 1

    def spent(self) -> GraderBudgetSpent:
        """The error that ends an iteration whose calls are all used up."""
        return GraderBudgetSpent(
            f"it used all {self.limit} model calls this iteration allows without a usable answer"
        )

    def record(self, response: ModelResponse[Any]) -> None:
        """Add the call's reported tokens; note the model that answered."""
        for message in response.result:
            if not isinstance(message, AIMessage):
                continue
            if message.usage_metadata:
                self.usage = add_usage(self.usage, message.usage_metadata)
            self.model = answered_model(message) or self.model


class _Metered(AgentMiddleware[Any, GraderMeter]):
    """Runs each grader model call through the invocation's `GraderMeter` (its runtime context)."""

    def wrap_model_call(
        self,
        request: ModelRequest[GraderMeter],
        handler: Callable[[ModelRequest[GraderMeter]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        meter = request.runtime.context
        meter.spend()
        response = handler(request)
        meter.record(response)
        return response

    async def awrap_model_call(
        self,
        request: ModelRequest[GraderMeter],
        handler: Callable[[ModelRequest[GraderMeter]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        meter = request.runtime.context
        meter.spend()
        response = await handler(request)
        meter.record(response)
        return response


@dataclass(frozen=True)
class GraderAgent:
    """A grader sub-agent answering in one schema; each ask spends from the given meter."""

    agent: Any

    @classmethod
    def build(
        cls, model: BaseChatModel, tools: Sequence[BaseTool], system_prompt: str, schema: type[BaseModel]
    ) -> GraderAgent:
        """The sub-agent: evidence `tools`, structured output in `schema`, no checkpointer."""
        agent = create_agent(
            model=model,
            tools=list(tools),
            system_prompt=system_prompt,
            response_format=schema,
            middleware=[_Metered(), PromptCaching()],
            context_schema=GraderMeter,
            name=GRADER_SOURCE,
            # The grader's scratch work is not part of the thread's history.
            checkpointer=False,
        )
        return cls(agent)

    def ask(self, payload: GraderPayload, meter: GraderMeter) -> BaseModel:
        """The grader's structured answer to `payload`; `GraderError` when it gives none."""
        result = self.agent.invoke(_inputs(payload), _config(meter), context=meter)
        return _answer(result)

    async def aask(self, payload: GraderPayload, meter: GraderMeter) -> BaseModel:
        """Async twin of `ask`."""
        result = await self.agent.ainvoke(_inputs(payload), _config(meter), context=meter)
        return _answer(result)


def _inputs(payload: GraderPayload) -> dict[str, Any]:
    return {"messages": [payload_message(payload)]}


def _config(meter: GraderMeter) -> dict[str, Any]:
    # Each model call can be followed by a tool round: room for all the calls left, so the
    # meter, with its clear message, is what stops a grader that will not answer.
    return {"recursion_limit": 2 * meter.left + 2}


def _answer(result: dict[str, Any]) -> BaseModel:
    grade = result.get("structured_response")
    if grade is None:
        raise NoStructuredAnswer("it finished without a structured answer")
    return grade
