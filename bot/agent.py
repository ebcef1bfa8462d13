"""The worker agent with the rubric grader, and one turn of a conversation with it.

`grading` does the revise-and-grade loop; this module wires it to the configured models, the
checkpointer and a calibration source, gives each run its thread's `ThreadContext`, and turns a
finished turn into what the thread should show.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, cast

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain.chat_models import init_chat_model
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, UsageMetadata
from langchain_core.messages.ai import add_usage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.types import StateSnapshot

from bot.config import ConfigError, Settings, problem
from bot.limits.prices import Role, RunCost, run_cost
from bot.material.fence import MATERIAL_NOTE
from bot.threads.summary import ThreadSummary, summary_usage
from bot.vocabulary.workspace import Workspace
from grading import (
    ANTHROPIC_LLM_TYPE,
    DEFAULT_MAX_GRADER_CALLS,
    EVALUATION_END_EVENT,
    EVALUATION_START_EVENT,
    EVIDENCE_TOOLS,
    CalibrationSource,
    RubricEvaluation,
    RubricMiddleware,
    Status,
    abstained,
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


@dataclass(frozen=True)
class ThreadContext:
    """The langgraph runtime context of a run (`create_agent(context_schema=...)`): where it was
    asked. The calibration source reads it to find the team's reviews."""

    workspace: Workspace
    channel: str


@dataclass(frozen=True)
class Provider:
    """A langchain model provider as the bot's error messages and install extras know it."""

    package: str
    """The langchain integration package on PyPI."""
    extra: str | None
    """The rubric-bot extra that installs it (`pip install 'rubric-bot[extra]'`); None: always installed."""
    key: str | None
    """The environment variable holding its API key, if it takes one."""


PROVIDERS: Mapping[str, Provider] = {
    "openai": Provider("langchain-openai", None, "OPENAI_API_KEY"),
    "anthropic": Provider("langchain-anthropic", "anthropic", "ANTHROPIC_API_KEY"),
    "google_genai": Provider("langchain-google-genai", "google", "GOOGLE_API_KEY"),
    "mistralai": Provider("langchain-mistralai", "mistral", "MISTRAL_API_KEY"),
    "groq": Provider("langchain-groq", "groq", "GROQ_API_KEY"),
    "ollama": Provider("langchain-ollama", "ollama", None),
}
"""Providers by their `provider:` prefix in a model string; each extra is declared in pyproject.toml."""

EvaluationHandler = Callable[[RubricEvaluation], Awaitable[None]]
"""Called with each grader iteration's evaluation as it happens."""

GradingHandler = Callable[[int, int], Awaitable[None]]
"""Called as each grader iteration starts, with its 0-based iteration and the run's iteration cap."""


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


def init_models(settings: Settings) -> tuple[BaseChatModel, BaseChatModel]:
    """The worker and grader chat models; a bad model string or missing provider key is a `ConfigError`.

    Without `RUBRIC_BOT_GRADER_MODEL` the grader is the worker's model (a problem is reported once).
    """
    models = _load_models(_deployment_models(settings), settings.model_timeout)
    worker = models[settings.worker_model or ""]
    return worker, models[settings.grader_model or ""]


def _deployment_models(settings: Settings) -> list[tuple[str, str | None]]:
    """The deployment's worker and grader models, by the setting each comes from."""
    specs = [("RUBRIC_BOT_MODEL", settings.worker_model)]
    if settings.grader_model_override:
        specs.append(("RUBRIC_BOT_GRADER_MODEL", settings.grader_model_override))
    return specs


def init_summary_model(settings: Settings, worker: BaseChatModel) -> BaseChatModel:
    """The model that summarizes long threads: `RUBRIC_BOT_SUMMARY_MODEL`, else the worker's."""
    spec = settings.summary_model_override
    if not spec:
        return worker
    return _load_models([("RUBRIC_BOT_SUMMARY_MODEL", spec)], settings.model_timeout)[spec]


def init_audit_model(settings: Settings) -> BaseChatModel | None:
    """The audit grader's model, `RUBRIC_BOT_AUDIT_MODEL`; None when it is not set (no audit)."""
    spec = settings.audit_model
    if not spec:
        return None
    return _load_models([("RUBRIC_BOT_AUDIT_MODEL", spec)], settings.model_timeout)[spec]


def _load_models(specs: Sequence[tuple[str, str | None]], timeout: float) -> dict[str, BaseChatModel]:
    """The chat model of each (setting, model string) in `specs`, by model string (each loaded
    once); every problem together as one `ConfigError`."""
    problems: list[str] = []
    models: dict[str, BaseChatModel] = {}
    for name, spec in specs:
        if spec is None:
            problems.append(problem(name, "is not set"))
            continue
        if spec in models:
            continue
        try:
            # Without a timeout, a provider that accepts a call and never answers holds the thread.
            models[spec] = init_chat_model(spec, timeout=timeout)
        except Exception as exc:  # provider packages raise many types for a bad name or missing key
            problems.append(model_problem(name, spec, exc))
    if problems:
        raise ConfigError(problems)
    return models


def model_problem(name: str, spec: str, exc: Exception) -> str:
    """What to do about model setting `name` (holding `spec`) whose model failed to load with `exc`.

    A missing integration package or API key is named as such, not blamed on the model string.
    """
    provider = PROVIDERS.get(spec.partition(":")[0]) if ":" in spec else None
    if isinstance(exc, ImportError) and provider is not None and provider.extra is not None:
        return (
            f"{name} ({spec}) needs the {provider.package} package, which is not installed: "
            f"pip install 'rubric-bot[{provider.extra}]' (or pip install {provider.package})."
        )
    # Without a prefix langchain guesses the provider; then only a key its error names is blamed.
    keys = [provider.key] if provider is not None else [p.key for p in PROVIDERS.values() if p.key]
    named = [key for key in keys if key and (provider is not None or key in str(exc))]
    missing = next((key for key in named if not os.environ.get(key)), None)
    if missing is not None:
        return f"{missing} is not set: {name} ({spec}) needs it; set it in the environment or .env."
    reason = " ".join(f"{type(exc).__name__}: {exc}".split())
    return problem(name, f"cannot be used ({reason})")


def build_agent(
    worker: BaseChatModel,
    grader: BaseChatModel,
    *,
    max_iterations: int,
    max_grader_calls: int = DEFAULT_MAX_GRADER_CALLS,
    checkpointer: BaseCheckpointSaver,
    calibration: CalibrationSource | None = None,
    context_tokens: int = 0,
    summarizer: BaseChatModel | None = None,
) -> ConversationAgent:
    """The worker agent whose answers are graded against the thread's rubric and revised.

    `calibration` supplies the team's worked examples for the grader; it is given each run's
    `ThreadContext` (see `run_turn`). With `context_tokens`, history past that many tokens is
    summarized for the worker, by `summarizer` (default: the worker); 0 never summarizes.
    """
    rubric = RubricMiddleware(
        model=grader,
        max_iterations=max_iterations,
        max_grader_calls=max_grader_calls,
        tools=EVIDENCE_TOOLS,
        calibration=calibration,
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


@dataclass(frozen=True)
class ModelPair:
    """The models of a run: the worker's and the grader's, as langchain "provider:model" strings."""

    worker: str
    grader: str


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
        build: Callable[[BaseChatModel, BaseChatModel], ConversationAgent],
    ) -> None:
        self._models = models
        self._build = build
        self._agents: dict[ModelPair, ConversationAgent] = {}
        self.default = self.agent(default)
        """The agent with the deployment's models."""

    def agent(self, models: ModelPair) -> ConversationAgent:
        """The agent answering with `models` (KeyError: a model not loaded at start-up)."""
        if models not in self._agents:
            self._agents[models] = self._build(self._models[models.worker], self._models[models.grader])
        return self._agents[models]


def configured_models(settings: Settings) -> dict[str, BaseChatModel]:
    """Every model a run may use, by model string: the deployment's worker, grader and summarizer,
    and `RUBRIC_BOT_ALLOWED_MODELS`; a bad one is a `ConfigError` naming its setting."""
    specs = _deployment_models(settings)
    specs += [("RUBRIC_BOT_ALLOWED_MODELS", spec) for spec in settings.allowed_models]
    if settings.summary_model_override:
        specs.append(("RUBRIC_BOT_SUMMARY_MODEL", settings.summary_model_override))
    return _load_models(specs, settings.model_timeout)


def configured_agents(
    settings: Settings, checkpointer: BaseCheckpointSaver, *, calibration: CalibrationSource | None = None
) -> AgentPool:
    """The agents the settings describe, checkpointed in `checkpointer`: the deployment's models by
    default, and each model of `RUBRIC_BOT_ALLOWED_MODELS` loaded for the workspaces that choose one."""
    models = configured_models(settings)
    # Without a summary model of its own, each agent summarizes with its worker.
    summarizer = models.get(settings.summary_model_override or "")

    def build(worker: BaseChatModel, grader: BaseChatModel) -> ConversationAgent:
        return build_agent(
            worker,
            grader,
            max_iterations=settings.max_iterations,
            max_grader_calls=settings.max_grader_calls,
            checkpointer=checkpointer,
            calibration=calibration,
            context_tokens=settings.context_tokens,
            summarizer=summarizer,
        )

    default = ModelPair(settings.worker_model or "", settings.grader_model or "")
    return AgentPool(models, default, build)


def agent_config(thread_id: str) -> RunnableConfig:
    """The invocation config of one conversation: its checkpointed thread."""
    return {"configurable": {"thread_id": thread_id}}


@dataclass(frozen=True)
class TurnOutcome:
    """What a finished turn shows in the thread."""

    status: Status | None
    """The grading status, or None when the conversation has no rubric (a plain answer)."""
    answer: str
    iterations: int | None
    max_iterations: int | None
    best_iteration: int | None
    """Set when the cap was hit: the iteration whose answer is shown."""
    worker_usage: UsageMetadata | None
    """The worker's tokens of this turn, when the model reported them."""
    grader_usage: UsageMetadata | None
    """The grader's tokens of this turn's evaluations, when the model reported them."""
    grader_calls: int
    """Grader model calls of this turn's evaluations."""
    summary_usage: UsageMetadata | None = None
    """The tokens of the thread summaries written in this turn, when the model reported them."""
    evaluations: tuple[RubricEvaluation, ...] = ()
    """This turn's evaluations, oldest first (those graded before a cut-short attempt's end too)."""
    cost: RunCost | None = None
    """What the turn's tokens cost, once priced (see `priced`)."""

    def priced(self, models: ModelPair, summary_model: str) -> TurnOutcome:
        """The outcome with its cost: the worker's tokens at `models.worker`'s rate, the grader's at
        `models.grader`'s, the summaries' at `summary_model`'s (the model that wrote them)."""
        usage: dict[Role, tuple[str, UsageMetadata | None]] = {
            "worker": (models.worker, self.worker_usage),
            "grader": (models.grader, self.grader_usage),
            "summary": (summary_model, self.summary_usage),
        }
        return replace(self, cost=run_cost(usage))

    @property
    def usage(self) -> UsageMetadata | None:
        """Worker, grader and summary tokens of this turn, when the models reported them."""
        return sum_usage([self.worker_usage, self.grader_usage, self.summary_usage])

    @property
    def open_criteria(self) -> list[str]:
        """The criteria the grader could not tell in the turn's last iteration: a person's to judge."""
        return abstained(self.evaluations[-1]) if self.evaluations else []


async def run_turn(
    agent: ConversationAgent,
    inputs: dict[str, Any] | None,
    config: RunnableConfig,
    on_evaluation: EvaluationHandler,
    *,
    on_grading: GradingHandler | None = None,
    context: ThreadContext | None = None,
    before: dict[str, Any] | None = None,
) -> TurnOutcome:
    """Invoke the agent once, calling `on_grading` as each grader iteration starts and
    `on_evaluation` after it.

    `inputs` None continues the turn the checkpoint holds (an attempt cut short); `context` says
    where the request was made (the calibration source needs it); `before` is the thread's state
    values just before the turn, when the caller has already read them.
    """
    if before is None:
        before = (await agent.aget_state(config)).values
    seen = {message.id for message in before.get("messages", [])}
    async for chunk in agent.astream(inputs, config, stream_mode="custom", context=context):
        if not isinstance(chunk, dict):
            continue
        if chunk.get("type") == EVALUATION_START_EVENT and on_grading is not None:
            await on_grading(chunk["iteration"], chunk["max_iterations"])
        elif chunk.get("type") == EVALUATION_END_EVENT:
            await on_evaluation(
                cast(RubricEvaluation, {key: value for key, value in chunk.items() if key != "type"})
            )
    state = (await agent.aget_state(config)).values
    new_messages = [m for m in state.get("messages", []) if m.id not in seen]
    return summarize_turn(state, new_messages, turn_evaluations(state, new_messages))


async def turn_so_far(
    agent: ConversationAgent, config: RunnableConfig, request_id: str
) -> TurnOutcome | None:
    """The turn answering the message `request_id` as far as its checkpoint holds it: what a turn
    that failed (or timed out) had done, and spent, before it did; None without the request."""
    state = (await agent.aget_state(config)).values
    messages = state.get("messages", [])
    earlier = messages_through(messages, request_id)
    if earlier is None:
        return None
    new_messages = messages[len(earlier) :]
    return summarize_turn(state, new_messages, turn_evaluations(state, new_messages))


def messages_through(messages: list[AnyMessage], message_id: str) -> list[AnyMessage] | None:
    """The conversation up to and including the message with `message_id`; None if it is not there."""
    ids = [message.id for message in messages]
    return messages[: ids.index(message_id) + 1] if message_id in ids else None


def turn_evaluations(state: dict[str, Any], new_messages: Sequence[AnyMessage]) -> list[RubricEvaluation]:
    """The evaluations the state holds of the turn whose messages are `new_messages`, oldest first.

    Read from the state rather than the stream, so a turn continued from its checkpoint counts the
    iterations graded before it was cut short too.
    """
    answers = {message.id for message in new_messages}
    return [e for e in state.get("_rubric_evaluations") or [] if e.get("answer_message_id") in answers]


def summarize_turn(
    state: dict[str, Any], new_messages: Sequence[AnyMessage], evaluations: Sequence[RubricEvaluation]
) -> TurnOutcome:
    """The outcome of a turn from the final state, the turn's messages and its evaluations."""
    graded = bool(state.get("rubric")) and bool(evaluations)
    status = state.get("_rubric_status") if graded else None
    best = state.get("_rubric_best_iteration") if status == "max_iterations_reached" else None
    last = evaluations[-1] if evaluations else None
    return TurnOutcome(
        status=status,
        answer=_answer_text(new_messages, evaluations, best),
        iterations=len(evaluations) if graded else None,
        max_iterations=last["max_iterations"] if last else None,
        best_iteration=best,
        worker_usage=sum_usage(m.usage_metadata for m in new_messages if isinstance(m, AIMessage)),
        grader_usage=sum_usage(e["usage"] for e in evaluations),
        grader_calls=sum(e["grader_calls"] for e in evaluations),
        summary_usage=sum_usage(summary_usage(new_messages)),
        evaluations=tuple(evaluations),
    )


def _answer_text(
    messages: Sequence[AnyMessage], evaluations: Sequence[RubricEvaluation], best: int | None
) -> str:
    answers = [m for m in messages if isinstance(m, AIMessage)]
    if best is not None:
        wanted = next((e["answer_message_id"] for e in evaluations if e["iteration"] == best), None)
        answers = [m for m in answers if m.id == wanted] or answers
    return answers[-1].text if answers else ""


def sum_usage(parts: Iterable[UsageMetadata | None]) -> UsageMetadata | None:
    """Token counts added up with langchain-core's `add_usage`; None when no model reported any."""
    reported = [part for part in parts if part]
    return functools.reduce(add_usage, reported) if reported else None
