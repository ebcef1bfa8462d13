"""The grader's requests, marked for the providers' prompt caches.

Providers bill the input a request shares with a recent one as cached, at a fraction of the price:
OpenAI finds a shared prefix by itself (and routes requests with one `prompt_cache_key` to the same
cache), Anthropic caches up to a `cache_control` breakpoint. The grader's user message is two
content blocks, its fixed part then its varying part (see `grading.grader.GraderPayload`); this
middleware puts an Anthropic breakpoint at the end of the fixed part, or gives an OpenAI request a
cache key naming it. Other providers get the request unchanged.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from typing import Any

from langchain.agents.middleware.types import AgentMiddleware, ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage, HumanMessage

from grading.grader import GraderPayload

ANTHROPIC_LLM_TYPE = "anthropic-chat"
"""`_llm_type` of langchain-anthropic's `ChatAnthropic`: its requests get a cache breakpoint."""

OPENAI_LLM_TYPE = "openai-chat"
"""`_llm_type` of langchain-openai's `ChatOpenAI`: its requests get a `prompt_cache_key`."""

CACHE_CONTROL = {"type": "ephemeral"}
"""Anthropic's cache breakpoint: cache the request's prefix up to here for its default 5 minutes."""

CACHE_KEY_PREFIX = "rubric-grader-"
"""Starts every `prompt_cache_key` the grader sends; a hash of its instructions and fixed part follows."""


def payload_message(payload: GraderPayload) -> HumanMessage:
    """The grader's user message: the fixed part and the varying part as two text blocks."""
    return HumanMessage(
        content=[{"type": "text", "text": payload.fixed}, {"type": "text", "text": payload.varying}]
    )


def cache_key(system_prompt: str, fixed: str) -> str:
    """The `prompt_cache_key` of requests sharing these instructions and this fixed part: one per
    rubric (with its examples), so one channel's runs share a cache and other channels' do not."""
    digest = hashlib.sha256(f"{system_prompt}\x00{fixed}".encode()).hexdigest()
    return CACHE_KEY_PREFIX + digest[:32]


def _llm_type(model: BaseChatModel | Any) -> str:
    return str(getattr(model, "_llm_type", ""))


def _with_breakpoint(messages: list[AnyMessage]) -> list[AnyMessage]:
    """`messages` with a breakpoint after the first user message's fixed part (its first block)."""
    marked = list(messages)
    for i, message in enumerate(marked):
        if isinstance(message, HumanMessage) and isinstance(message.content, list) and message.content:
            first, *rest = message.content
            if isinstance(first, dict):
                marked[i] = message.model_copy(
                    update={"content": [{**first, "cache_control": CACHE_CONTROL}, *rest]}
                )
            break
    return marked


def _fixed_text(messages: list[AnyMessage]) -> str | None:
    for message in messages:
        if isinstance(message, HumanMessage) and isinstance(message.content, list) and message.content:
            first = message.content[0]
            return first.get("text") if isinstance(first, dict) else None
    return None


def cached_request(request: ModelRequest[Any]) -> ModelRequest[Any]:
    """`request` marked for its provider's prompt cache (unchanged for a provider without one)."""
    kind = _llm_type(request.model)
    if kind == ANTHROPIC_LLM_TYPE:
        return request.override(messages=_with_breakpoint(request.messages))
    fixed = _fixed_text(request.messages)
    if kind == OPENAI_LLM_TYPE and fixed is not None:
        system = request.system_message.text if request.system_message else ""
        settings = {**request.model_settings, "prompt_cache_key": cache_key(system, fixed)}
        return request.override(model_settings=settings)
    return request


class PromptCaching(AgentMiddleware[Any, Any]):
    """Marks each grader model call for its provider's prompt cache (see the module docstring)."""

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> ModelResponse[Any]:
        return handler(cached_request(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> ModelResponse[Any]:
        return await handler(cached_request(request))
