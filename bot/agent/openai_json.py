"""OpenAI chat models that hand the SDK their messages and tools as the JSON they already are.

Before it sends a chat completion, the openai SDK walks every parameter against its TypedDicts to
rename and format fields (`openai._utils._transform`): a message is tried against each of the six
message types of the union, every key of each, about a millisecond of CPU a message and two for the
grader's evidence tools, on every model call (a third of the bot's CPU under load, issue 45).
langchain-openai has already built those parameters as plain JSON, and no field of a chat
completion's messages or function tools is renamed or formatted, so the walk changes nothing: here
they go in the request's ``extra_body`` (JSON properties the SDK sends as given, over its own), and
the provider gets the same request body.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_openai import ChatOpenAI

AS_GIVEN = ("messages", "tools")
"""The chat completion parameters sent as given (in ``extra_body``): the ones the SDK's walk costs."""


class ChatOpenAIAsJson(ChatOpenAI):
    """`ChatOpenAI` whose chat completions' messages and tools skip the SDK's parameter walk."""

    def _get_request_payload(
        self, input_: LanguageModelInput, *, stop: list[str] | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        if "messages" not in payload:  # the Responses API's payload: left as it is
            return payload
        given = {name: payload.pop(name) for name in AS_GIVEN if name in payload}
        payload["extra_body"] = {**(payload.get("extra_body") or {}), **given}
        payload["messages"] = []  # required by the SDK's signature; the body's are `extra_body`'s
        return payload


def as_json(model: BaseChatModel) -> BaseChatModel:
    """`model` as a `ChatOpenAIAsJson` with the same settings where it is a plain `ChatOpenAI`
    (Azure's, a gateway's or another provider's model is returned as it is)."""
    if type(model) is not ChatOpenAI:
        return model
    return ChatOpenAIAsJson(**{name: getattr(model, name) for name in model.model_fields_set})
