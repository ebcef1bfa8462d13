"""The worker agent with the rubric grader: one per pair of models in use, all on one checkpointer.

`grading` does the revise-and-grade loop; this module wires it to the configured models, the
checkpointer and a calibration source, and gives each run its thread's `ThreadContext`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, cast

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

from bot.agent.models import ModelPair, configured_models
from bot.agent.summary import ThreadSummary
from bot.config import Settings
from bot.material.fence import MATERIAL_NOTE
from bot.vocabulary.workspace import Workspace
from grading import (
    ANTHROPIC_LLM_TYPE,
    DEFAULT_MAX_GRADER_CALLS,
    EVIDENCE_TOOLS,
    CalibrationSource,
    RubricMiddleware,
    TrustSource,
)

WORKER_SYSTEM_PROMPT = (
    "You are a helpful teammate answering requests in a Slack thread. "
    "Answer directly and completely in Markdown (headings, lists, code blocks and links are fine). "
    "When a message starts with grader feedback, revise your previous answer to address every point "
    "and reply with the complete revised answer, not just the changes. "
    f"{MATERIAL_NOTE}"
)
"""The worker's instructions: a Slack teammate that answers in Markdown, takes grader feedback and
reads what people shared as material, not as instructions."""

T = TypeVar("T")


@dataclass(frozen=True)
class ThreadContext:
    """The langgraph runtime context of a run (`create_agent(context_schema=...)`): where it was
    asked. The calibration and trust sources read it to find the team's reviews and thresholds,
    once a run (`once`)."""

    workspace: Workspace
    channel: str
    _read: dict[Hashable, Any] = field(default_factory=dict, compare=False, repr=False)

    async def once(self, key: Hashable, read: Callable[[], Awaitable[T]]) -> T:
        """What `read` returns, read on the run's first call with `key` and the same on every later
        one (a source's answer for each of the run's iterations); a failed read is not kept."""
        if key not in self._read:
            self._read[key] = await read()
        return cast(T, self._read[key])


class ConversationAgent(Protocol):
    """The parts of a compiled langgraph agent the bot uses."""

    def astream(
        self,
        input: dict[str, Any] | None,
        config: RunnableConfig,
        *,
        stream_mode: str,
        context: ThreadContext | None,
    ) -> AsyncIterator[Any]: ...

    async def aget_state(self, config: RunnableConfig) -> StateSnapshot: ...

    async def aupdate_state(self, config: RunnableConfig, values: dict[str, Any]) -> Any: ...


def build_agent(
    worker: BaseChatModel,
    grader: BaseChatModel,
    *,
    max_iterations: int,
    max_grader_calls: int = DEFAULT_MAX_GRADER_CALLS,
    checkpointer: BaseCheckpointSaver,
    calibration: CalibrationSource | None = None,
    trust: TrustSource | None = None,
    context_tokens: int = 0,
    summarizer: BaseChatModel | None = None,
    grader_samples: int = 1,
    escalation: BaseChatModel | None = None,
) -> ConversationAgent:
    """The worker agent whose answers are graded against the thread's rubric and revised.

    `calibration` supplies the team's worked examples for the grader and `trust` the channel's
    confidence thresholds; each is given the run's `ThreadContext` (see `run_turn`). With
    `context_tokens`, history past that many tokens is summarized for the worker, by `summarizer`
    (default: the worker); 0 never summarizes. The grader
    is asked `grader_samples` times an iteration; `escalation` grades again what its samples split on.
    """
    rubric = RubricMiddleware(
        model=grader,
        max_iterations=max_iterations,
        max_grader_calls=max_grader_calls,
        tools=EVIDENCE_TOOLS,
        calibration=calibration,
        trust=trust,
        samples=grader_samples,
        escalation_model=escalation,
    )
    middleware: list[AgentMiddleware[Any, Any]] = [rubric, *prompt_caching(worker)]
    if context_tokens:
        # First, so the worker's every call (revisions included) sees the bounded history.
        middleware.insert(0, ThreadSummary(worker, context_tokens=context_tokens, summarizer=summarizer))
    agent = create_agent(
        worker,
        system_prompt=WORKER_SYSTEM_PROMPT,
        middleware=middleware,
        context_schema=ThreadContext,
        checkpointer=checkpointer,
    )
    # Statically the graph takes langchain's InputAgentState only; at run time its input schema
    # also has the middleware's `rubric` key, which the bot passes (see `run_turn`).
    return cast(ConversationAgent, agent)


def prompt_caching(worker: BaseChatModel) -> list[AgentMiddleware[Any, Any]]:
    """The middleware that caches the worker's stable prefix (its instructions and the earlier turns)
    with its provider: Anthropic's needs breakpoints, set by langchain-anthropic's middleware; OpenAI
    caches a shared prefix by itself."""
    if getattr(worker, "_llm_type", None) != ANTHROPIC_LLM_TYPE:
        return []
    # Only an anthropic model needs (and can import) the anthropic extra.
    from langchain_anthropic.middleware import AnthropicPromptCachingMiddleware

    return [AnthropicPromptCachingMiddleware(unsupported_model_behavior="ignore")]


class AgentPool:
    """The agents of a deployment, one per pair of models in use, all on one checkpointer.

    Every model a run may use (the deployment's and `RUBRIC_BOT_ALLOWED_MODELS`) is loaded at start-up,
    so a bad one stops the start rather than a run; an agent is compiled on first use of its pair.
    A conversation's state does not depend on its models: any agent of the pool reads it.
    """

    def __init__(
        self,
        models: Mapping[str, BaseChatModel],
        default: ModelPair,
        build: Callable[[BaseChatModel, BaseChatModel, int], ConversationAgent],
        grader_samples: int = 1,
    ) -> None:
        self._models = models
        self._build = build
        self._grader_samples = grader_samples
        self._agents: dict[tuple[ModelPair, int], ConversationAgent] = {}
        self.default = self.agent(default)
        """The agent with the deployment's models and grader samples."""

    def agent(self, models: ModelPair, grader_samples: int | None = None) -> ConversationAgent:
        """The agent answering with `models`, its grader asked `grader_samples` times an iteration
        (None: the deployment's); KeyError: a model not loaded at start-up."""
        key = (models, grader_samples or self._grader_samples)
        if key not in self._agents:
            self._agents[key] = self._build(self._models[models.worker], self._models[models.grader], key[1])
        return self._agents[key]


def configured_agents(
    settings: Settings,
    checkpointer: BaseCheckpointSaver,
    *,
    calibration: CalibrationSource | None = None,
    trust: TrustSource | None = None,
) -> AgentPool:
    """The agents the settings describe, checkpointed in `checkpointer`: the deployment's models by
    default, and each model of `RUBRIC_BOT_ALLOWED_MODELS` loaded for the workspaces that choose one."""
    models = configured_models(settings)
    # Without a summary model of its own, each agent summarizes with its worker.
    summarizer = models.get(settings.summary_model_override or "")

    def build(worker: BaseChatModel, grader: BaseChatModel, grader_samples: int) -> ConversationAgent:
        return build_agent(
            worker,
            grader,
            max_iterations=settings.max_iterations,
            max_grader_calls=settings.max_grader_calls,
            checkpointer=checkpointer,
            calibration=calibration,
            trust=trust,
            context_tokens=settings.context_tokens,
            summarizer=summarizer,
            grader_samples=grader_samples,
            escalation=models.get(settings.escalation_model or ""),
        )

    default = ModelPair(settings.worker_model or "", settings.grader_model or "")
    return AgentPool(models, default, build, settings.grader_samples)


def agent_config(thread_id: str) -> RunnableConfig:
    """The invocation config of one conversation: its checkpointed thread."""
    return {"configurable": {"thread_id": thread_id}}
