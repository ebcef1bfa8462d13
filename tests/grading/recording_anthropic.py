"""langchain-anthropic's `ChatAnthropic`, answering offline: it records the request body it would send
Anthropic (built by its own `_get_request_payload`, cache breakpoints included) and answers with a
script, so tests see exactly what would go on the wire without a network."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

Reply = Callable[[dict[str, Any]], AIMessage]
"""Turns the request body Anthropic would get into the model's answer."""


def recording_anthropic(reply: Reply, model: str = "claude-sonnet-4-5") -> Any:
    """A `ChatAnthropic` for `model` whose `sent` lists the request bodies, answering with `reply`;
    the test is skipped without langchain-anthropic (the `anthropic` extra)."""
    langchain_anthropic = pytest.importorskip("langchain_anthropic")

    class RecordingAnthropic(langchain_anthropic.ChatAnthropic):
        sent: list[dict[str, Any]] = Field(default_factory=list)

        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
        ) -> ChatResult:
            payload = self._get_request_payload(messages, stop=stop, **kwargs)
            self.sent.append(payload)
            return ChatResult(generations=[ChatGeneration(message=reply(payload))])

    return RecordingAnthropic(model=model, api_key="test")
