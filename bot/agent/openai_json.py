"""OpenAI chat models that hand the SDK their messages, tools and model name as the JSON they
already are.

Before it sends a chat completion, the openai SDK walks every parameter against its TypedDicts to
rename and format fields (`openai._utils._transform`): a message is tried against each of the six
message types of the union, every key of each, about a millisecond of CPU a message and two for the
grader's evidence tools, and the model's name against a union with a `Literal` of every OpenAI model,
which typing hashes anew on each lookup (~0.5 ms), and a grader's structured answer format, whose
JSON schema it walks node by node, on every model call: a third of the bot's CPU under load (issue
45). langchain-openai has already built those parameters as plain JSON, and none of them is renamed
or formatted, so the walk changes nothing: here they go in the request's ``extra_body`` (JSON
properties the SDK sends as given, over its own), and the provider gets the same request body.

A structured answer's format stays named in the payload, as given-nothing (``omit``): langchain-openai
sends a payload with one through the SDK's ``parse``, which refuses an answer cut short by the token
limit or by the content filter, and the grader keeps that refusal.

langchain-core asks, for each block of a message's content, whether it is a data block, and builds
the list of data block types from the type hints of its TypedDicts on every question (~1 ms, twice
per grader call): `_memoized_data_block_types` builds it once.
"""

from __future__ import annotations

import functools
from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import content as message_content
from langchain_openai import ChatOpenAI
from openai import omit

AS_GIVEN = ("messages", "tools", "model")
"""The chat completion parameters sent as given (in ``extra_body``): the ones the SDK's walk costs."""

FORMAT = "response_format"
"""The structured answer's format: sent as given too where it is JSON (a pydantic class is left to the
SDK, which builds its schema and parses the answer into it)."""


class ChatOpenAIAsJson(ChatOpenAI):
    """`ChatOpenAI` whose chat completions' messages, tools and model name skip the SDK's walk."""

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API's payload: left as it is
            return payload
        given = {name: payload.pop(name) for name in AS_GIVEN if name in payload}
        if isinstance(payload.get(FORMAT), dict):
            given[FORMAT], payload[FORMAT] = payload[FORMAT], omit
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **given}
        # What the SDK's signature requires: none of it in the body, where `extra_body`'s are.
        payload["messages"], payload["model"] = [], omit
        return payload


def as_json(model: BaseChatModel) -> BaseChatModel:
    """`model` as a `ChatOpenAIAsJson` with the same settings where it is a plain `ChatOpenAI`
    (Azure's, a gateway's or another provider's model is returned as it is)."""
    _memoize_data_block_types()
    if type(model) is not ChatOpenAI:
        return model
    return ChatOpenAIAsJson(**{name: getattr(model, name) for name in model.model_fields_set})


def _memoize_data_block_types() -> None:
    """Have langchain-core build its data block types once (see the module docstring): they are
    read from the type hints of its own `DataContentBlock` union, the same on every call."""
    built = getattr(message_content, "_get_data_content_block_types", None)
    # A langchain-core that renamed it (or memoizes it itself) is left as it is: this only saves CPU.
    if callable(built) and not hasattr(built, "cache_info"):
        message_content._get_data_content_block_types = functools.cache(built)
