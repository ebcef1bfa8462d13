"""A local OpenAI-compatible chat completions server whose answers tests script.

The bot runs ``openai:gpt-4o-mini`` with ``OPENAI_BASE_URL`` pointing here. Each request is a grader
request (a grader schema is asked for, as ``response_format`` or as a tool), a summary request (langchain's
summary prompt, sent when a long thread is summarized) or a worker request (everything else), and is
answered by the test's handler for that role: ``standin.worker`` returns the worker's text (or tool
calls), ``standin.grader`` returns a grade dict, which the stand-in delivers in whatever shape the
request asked for, ``standin.summarizer`` returns the summary's text. Streaming (SSE, with
``stream_options.include_usage``) and plain answers are both served; every request is recorded. A
handler can also make a request fail, with ``ErrorReply(status)``, or hang, with ``NO_ANSWER`` (a
provider that accepts the call and never answers).

Like OpenAI, the stand-in reports as cached (``usage.prompt_tokens_details.cached_tokens``) the
input a request shares with an earlier one: the longest run of leading words (its tools and answer
schema, then its messages; see `ChatRequest.input_words`) it shares with an earlier request, counted
once it reaches `cache_min_tokens` and in steps of `cache_step_tokens` beyond (OpenAI's 1,024 and
128).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal, NamedTuple

from aiohttp import web
from langchain.agents.middleware.summarization import DEFAULT_SUMMARY_PROMPT

from tests.standins import STOP_TIMEOUT, BackgroundServer

Role = Literal["worker", "grader", "summary"]
Json = dict[str, Any]

GRADER_SCHEMA_NAMES = frozenset({"RubricGrade", "ScoredRubricGrade"})
"""Structured-output schema names the grading engine uses; a request asking for one is a grader request."""
SCORED_SCHEMA_NAME = "ScoredRubricGrade"
"""The grader schema for scored (1-5 per dimension) rubrics; grades for it carry a score per criterion."""

PASSING_SCORE = 5
"""Score the scripted graders give a scored dimension they pass."""
FAILING_SCORE = 2
"""Score the scripted graders give a scored dimension they fail (low enough to fail any sane pass_score)."""

OPENAI_CACHE_MIN_TOKENS = 1024
"""The shortest shared prefix OpenAI caches."""
OPENAI_CACHE_STEP_TOKENS = 128
"""OpenAI caches a shared prefix beyond the minimum in steps of this many tokens."""
CACHE_MEMORY = 256
"""How many earlier requests the stand-in's cache remembers."""

SUMMARY_PROMPT_START = DEFAULT_SUMMARY_PROMPT.partition("{messages}")[0][:80]
"""How langchain's `SummarizationMiddleware` starts the request for a summary: such a request is a
summary request (the bot's summarizer is the worker's model unless one is configured)."""

MAX_REQUEST_BYTES = 32 * 1024 * 1024
"""Largest request body the stand-in takes (aiohttp's default is 1 MiB): a provider takes a long
thread's whole history, as the long-thread benchmark sends it without a context limit."""

DEFAULT_SUMMARY = "Summary of the earlier conversation."
"""What the summarizer answers until a test scripts it."""

DEFAULT_ANSWER = "Stand-in answer."
"""What the worker answers until a test scripts it."""
DRAFT_ANSWER = "Draft answer v1"
"""The scripted worker's first answer; distinctive so it never occurs in prompts by accident."""
REVISED_ANSWER = "Revised answer v2"
"""The scripted worker's answer after grader feedback; distinctive for the same reason."""
DEFAULT_GAP = "The answer must cite a source for its claim."
"""Gap text the scripted graders give a failing criterion."""
CANNOT_TELL_REASON = "The thread holds no figures to check this against."
"""Reason the scripted graders give a criterion they cannot tell."""

MODEL_RELEASE = "2026-01-01"
"""The stand-in answers as a dated release of the model asked for (``gpt-4o-mini`` answers as
``gpt-4o-mini-2026-01-01``), as providers name the snapshot behind an alias."""


def answering_model(asked: str) -> str:
    """The model name the stand-in's answers give for a request that asked for `asked`."""
    return f"{asked}-{MODEL_RELEASE}"


@dataclass(frozen=True)
class ToolCall:
    """One function call the stand-in's answer asks the client to make."""

    name: str
    args: Json


@dataclass(frozen=True)
class ToolCallReply:
    """A handler's answer that calls tools instead of (or besides) answering with text."""

    calls: tuple[ToolCall, ...]
    content: str = ""


@dataclass(frozen=True)
class ErrorReply:
    """A handler's answer that fails the request with HTTP `status`, as a provider's outage would;
    `message` is the provider's error text (by default one naming the status)."""

    status: int = 500
    message: str | None = None


class Silence(Enum):
    """The type of `NO_ANSWER`."""

    NO_ANSWER = "no answer"


NO_ANSWER = Silence.NO_ANSWER
"""A handler's answer that accepts the request and never answers it; the connection stays open until
the client gives up or the stand-in stops."""


def call_tool(name: str, /, **args: Any) -> ToolCallReply:
    """A reply that makes exactly one tool call, e.g. ``call_tool("count_lines", text="a")``."""
    return ToolCallReply(calls=(ToolCall(name, args),))


@dataclass(frozen=True)
class ChatRequest:
    """A recorded chat completions request, with easy access to what handlers look at."""

    body: Json
    role: Role
    cached_tokens: int = 0
    """The input tokens the stand-in reported as cached for this request."""

    @classmethod
    def from_body(cls, body: Json) -> ChatRequest:
        if _grader_schema(body) is not None:
            return cls(body=body, role="grader")
        first = _text((body.get("messages") or [{}])[0].get("content"))
        return cls(body=body, role="summary" if first.startswith(SUMMARY_PROMPT_START) else "worker")

    @property
    def model(self) -> str:
        """The model the request asked for (as the provider names it, e.g. ``gpt-4o-mini``)."""
        return str(self.body.get("model") or "")

    @property
    def messages(self) -> list[Json]:
        return list(self.body.get("messages") or [])

    @property
    def system(self) -> str:
        """The system (and developer) instructions, joined."""
        return "\n".join(self._texts_of("system", "developer"))

    @property
    def last_user_text(self) -> str:
        return next(reversed(self._texts_of("user")), "")

    @property
    def last_assistant_text(self) -> str:
        return next(reversed(self._texts_of("assistant")), "")

    @property
    def all_text(self) -> str:
        """Every message's text, in order, one per line."""
        return "\n".join(_text(m.get("content")) for m in self.messages)

    @property
    def prompt_tokens(self) -> int:
        """The input tokens the stand-in reports for this request: its words (see `input_words`)."""
        return len(self.input_words) + 1

    @property
    def input_words(self) -> tuple[str, ...]:
        """The request's input as the stand-in counts it, in the order a provider reads it: the
        words of its tools and answer schema (as JSON), then its messages' words."""
        schemas = [part for part in (self.body.get("tools"), self.body.get("response_format")) if part]
        return (*(json.dumps(schemas).split() if schemas else ()), *self.all_text.split())

    @property
    def schema_name(self) -> str | None:
        """``response_format.json_schema.name`` when the request asks for JSON schema output."""
        response_format = self.body.get("response_format") or {}
        return (response_format.get("json_schema") or {}).get("name")

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.body.get("tools") or [] if "function" in t]

    @property
    def grader_schema(self) -> str | None:
        """The grader schema this request asks for (as response format or tool), if any."""
        return _grader_schema(self.body)

    @property
    def is_scored(self) -> bool:
        return self.grader_schema == SCORED_SCHEMA_NAME

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    @property
    def include_usage(self) -> bool:
        """Whether a streamed answer must end with a usage chunk."""
        return bool((self.body.get("stream_options") or {}).get("include_usage"))

    def _texts_of(self, *roles: str) -> list[str]:
        return [_text(m.get("content")) for m in self.messages if m.get("role") in roles]


WorkerHandler = Callable[[ChatRequest], str | ToolCallReply | ErrorReply | Silence]
SummaryHandler = Callable[[ChatRequest], str]
GraderHandler = Callable[[ChatRequest], Json | ToolCallReply | ErrorReply | Silence]


def _default_worker(request: ChatRequest) -> str:
    return DEFAULT_ANSWER


def _default_summary(request: ChatRequest) -> str:
    return DEFAULT_SUMMARY


class _Reply(NamedTuple):
    content: str | None
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class _Fault:
    status: int
    role: Role | None


@dataclass
class _State:
    requests: list[ChatRequest] = field(default_factory=list)
    faults: deque[_Fault] = field(default_factory=deque)
    handler_errors: list[str] = field(default_factory=list)
    in_flight: int = 0
    peak_in_flight: int = 0
    counter: int = 0
    cache: deque[tuple[str, ...]] = field(default_factory=lambda: deque(maxlen=CACHE_MEMORY))


class HandlerError(Exception):
    """A handler failed or is missing; answered as HTTP 400 so the client does not retry it."""


class ModelApiStandin(BackgroundServer):
    """OpenAI chat completions on 127.0.0.1 at ``/v1/chat/completions``.

    Set `worker` and `grader` handlers and `latency` (seconds slept per request, concurrently) from
    the test; they may change at any time. Handlers run on the server's event loop, so they must be
    quick: slow answers come from `latency`, not from sleeping in a handler; answers the test must
    keep back until something has happened come from `hold` and `release`.
    """

    def __init__(self) -> None:
        super().__init__()
        self.worker: WorkerHandler = _default_worker
        self.grader: GraderHandler | None = None
        self.summarizer: SummaryHandler = _default_summary
        self.latency = 0.0
        self.cache_min_tokens = OPENAI_CACHE_MIN_TOKENS
        self.cache_step_tokens = OPENAI_CACHE_STEP_TOKENS
        self._lock = threading.Lock()
        self._state = _State()
        self._stopping: asyncio.Event | None = None
        self._answering: asyncio.Event | None = None

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (``OPENAI_BASE_URL``)."""
        return f"{self.url}/v1"

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_route("*", "/{path:.*}", _handle_unknown)
        self._stopping = asyncio.Event()
        self._answering = asyncio.Event()
        self._answering.set()
        app.on_shutdown.append(self._release_silent)
        return app

    def hold(self) -> None:
        """Answer nothing until `release`: requests are recorded as they arrive, then wait."""
        self._set_answering(False)

    def release(self) -> None:
        """Answer the held requests, and every later one as usual."""
        self._set_answering(True)

    def _set_answering(self, answering: bool) -> None:
        """Open or close the gate on the server's loop; returns once it has changed."""
        loop, gate = self._loop, self._answering
        if loop is None or gate is None:
            raise RuntimeError("the model stand-in is not running")
        loop.call_soon_threadsafe(gate.set if answering else gate.clear)
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(timeout=STOP_TIMEOUT)

    def fail_next(self, status: int = 500, times: int = 1, *, role: Role | None = None) -> None:
        """Answer the next `times` requests (of `role`, when given) with HTTP `status`."""
        with self._lock:
            self._state.faults.extend([_Fault(status, role)] * times)

    def requests(self, role: Role | None = None) -> list[ChatRequest]:
        """Every request received, oldest first (failed ones included); only `role`'s when given."""
        with self._lock:
            return [r for r in self._state.requests if role is None or r.role == role]

    @property
    def handler_errors(self) -> list[str]:
        """Descriptions of handler failures, so a test can tell a script bug from a bot bug."""
        with self._lock:
            return list(self._state.handler_errors)

    @property
    def peak_concurrency(self) -> int:
        """Most requests that were being answered at the same moment."""
        with self._lock:
            return self._state.peak_in_flight

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        chat = ChatRequest.from_body(await request.json())
        with self._lock:
            chat = dataclasses.replace(chat, cached_tokens=self._cached_tokens(chat.input_words))
            self._state.requests.append(chat)
            self._state.in_flight += 1
            self._state.peak_in_flight = max(self._state.peak_in_flight, self._state.in_flight)
            fault = self._take_fault(chat.role)
        try:
            await asyncio.sleep(self.latency)
            assert self._answering is not None  # set with the app
            await self._answering.wait()
            if fault is not None:
                return _error(fault.status, "server_error", f"stand-in injected HTTP {fault.status}")
            try:
                reply = self._reply(chat)
            except HandlerError as error:
                with self._lock:
                    self._state.handler_errors.append(str(error))
                return _error(400, "invalid_request_error", str(error))
            if isinstance(reply, ErrorReply):
                message = reply.message or f"stand-in handler answered HTTP {reply.status}"
                return _error(reply.status, "server_error", message)
            if reply is NO_ANSWER:
                assert self._stopping is not None  # set with the app
                await self._stopping.wait()
                return _error(503, "server_error", "stand-in stopped without answering")
            return await self._respond(request, chat, reply)
        finally:
            with self._lock:
                self._state.in_flight -= 1

    def _cached_tokens(self, words: tuple[str, ...]) -> int:
        """The tokens of `words` a provider would serve from its cache; remembers `words` (under the lock)."""
        shared = max((_shared_prefix(words, earlier) for earlier in self._state.cache), default=0)
        self._state.cache.append(words)
        if shared < self.cache_min_tokens:
            return 0
        step = max(self.cache_step_tokens, 1)
        return self.cache_min_tokens + (shared - self.cache_min_tokens) // step * step

    def _take_fault(self, role: Role) -> _Fault | None:
        faults = self._state.faults
        for fault in faults:
            if fault.role in (None, role):
                faults.remove(fault)
                return fault
        return None

    async def _release_silent(self, app: web.Application) -> None:
        """Let requests given NO_ANSWER end, so that stopping the stand-in does not wait for them."""
        assert self._stopping is not None and self._answering is not None
        self._stopping.set()
        self._answering.set()

    def _reply(self, chat: ChatRequest) -> _Reply | ErrorReply | Silence:
        handler = {"worker": self.worker, "grader": self.grader, "summary": self.summarizer}[chat.role]
        if handler is None:
            raise HandlerError(f"model stand-in: no {chat.role} handler is set")
        try:
            answer = handler(chat)
        except Exception as exc:  # a broken script must show up as a clear error, not a hang
            raise HandlerError(f"model stand-in: {chat.role} handler failed: {exc!r}") from exc
        if isinstance(answer, ErrorReply | Silence):
            return answer
        if isinstance(answer, ToolCallReply):
            return _Reply(answer.content or None, answer.calls)
        if isinstance(answer, str):
            return _Reply(answer, ())
        if chat.schema_name in GRADER_SCHEMA_NAMES:
            return _Reply(json.dumps(answer), ())
        if chat.grader_schema is not None:
            return _Reply(None, (ToolCall(chat.grader_schema, answer),))
        raise HandlerError(f"model stand-in: {chat.role} handler returned {type(answer).__name__}")

    async def _respond(self, request: web.Request, chat: ChatRequest, reply: _Reply) -> web.StreamResponse:
        with self._lock:
            self._state.counter += 1
            number = self._state.counter
        calls = [
            {
                "id": f"call_{number}_{index}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.args)},
            }
            for index, call in enumerate(reply.calls)
        ]
        completion = _Completion(
            id=f"chatcmpl-{number}",
            model=answering_model(str(chat.body.get("model", ""))),
            content=reply.content,
            calls=calls,
            usage=_usage(chat, reply),
        )
        if not chat.stream:
            return web.json_response(completion.whole())
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for chunk in completion.chunks(include_usage=chat.include_usage):
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


@dataclass(frozen=True)
class _Completion:
    """One answer, rendered either as a whole completion or as stream chunks."""

    id: str
    model: str
    content: str | None
    calls: list[Json]
    usage: Json
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def finish_reason(self) -> str:
        return "tool_calls" if self.calls else "stop"

    def whole(self) -> Json:
        message: Json = {"role": "assistant", "content": self.content, "refusal": None}
        if self.calls:
            message["tool_calls"] = self.calls
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}
        return {**self._envelope("chat.completion"), "choices": [choice], "usage": self.usage}

    def chunks(self, *, include_usage: bool) -> Iterator[Json]:
        yield self._chunk({"role": "assistant", "content": ""})
        for piece in re.findall(r"\s*\S+", self.content or ""):
            yield self._chunk({"content": piece})
        for index, call in enumerate(self.calls):
            function = call["function"]
            yield self._chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                }
            )
            yield self._chunk(
                {"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]}
            )
        yield self._chunk({}, finish_reason=self.finish_reason)
        if include_usage:
            yield {**self._envelope("chat.completion.chunk"), "choices": [], "usage": self.usage}

    def _chunk(self, delta: Json, finish_reason: str | None = None) -> Json:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {**self._envelope("chat.completion.chunk"), "choices": [choice]}

    def _envelope(self, kind: str) -> Json:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": None,
        }


def _usage(chat: ChatRequest, reply: _Reply) -> Json:
    """Token counts: whitespace-separated words, a deterministic stand-in for a tokenizer."""
    prompt = chat.prompt_tokens
    completion = len((reply.content or "").split()) + sum(
        len(json.dumps(call.args).split()) for call in reply.calls
    )
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": chat.cached_tokens},
    }


def _shared_prefix(words: Sequence[str], other: Sequence[str]) -> int:
    """How many leading words two sequences share."""
    count = 0
    for mine, theirs in zip(words, other, strict=False):
        if mine != theirs:
            break
        count += 1
    return count


def _error(status: int, kind: str, message: str) -> web.Response:
    return web.json_response(
        {"error": {"message": message, "type": kind, "param": None, "code": None}}, status=status
    )


async def _handle_unknown(request: web.Request) -> web.Response:
    return _error(
        404,
        "invalid_request_error",
        f"model stand-in serves only POST /v1/chat/completions, not {request.method} {request.path}",
    )


def _grader_schema(body: Json) -> str | None:
    response_format = body.get("response_format") or {}
    offered = [(response_format.get("json_schema") or {}).get("name")]
    offered += [t.get("function", {}).get("name") for t in body.get("tools") or []]
    return next((name for name in offered if name in GRADER_SCHEMA_NAMES), None)


def _text(content: Any) -> str:
    """A message's text, whether its content is a string or a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


# ----- ready-made scripts -----


def grade(
    criteria: Sequence[str],
    *,
    failing: Collection[str] = (),
    gap: str = DEFAULT_GAP,
    explanation: str | None = None,
    scored: bool = False,
    cannot_tell: Collection[str] = (),
) -> Json:
    """A grade dict that fails the `failing` criteria with `gap`, cannot tell the `cannot_tell` ones
    (with CANNOT_TELL_REASON) and passes the rest.

    Pass/fail criteria get ``passed``; with `scored`, dimensions get a 1-5 ``score`` instead
    (FAILING_SCORE or PASSING_SCORE), as the grading engine's two grade schemas expect.
    """
    unknown = (set(failing) | set(cannot_tell)) - set(criteria)
    if unknown:
        raise ValueError(f"failing or cannot-tell criteria not in the rubric: {sorted(unknown)}")
    items: list[Json] = []
    for name in criteria:
        if name in cannot_tell:
            items.append({"name": name, "passed": False, "cannot_tell": True, "gap": CANNOT_TELL_REASON})
            continue
        passed = name not in failing
        verdict = {"score": PASSING_SCORE if passed else FAILING_SCORE} if scored else {"passed": passed}
        items.append({"name": name, **verdict, "gap": "" if passed else gap})
    if explanation is None:
        explanation = f"Not yet met: {', '.join(failing)}." if failing else "Every criterion is met."
    return {
        "result": "needs_revision" if failing else "satisfied",
        "explanation": explanation,
        "criteria": items,
    }


def fixed_grader(
    criteria: Sequence[str], *, failing: Collection[str] = (), gap: str = DEFAULT_GAP
) -> GraderHandler:
    """A grader that always gives the same verdict (with scores when the rubric is scored)."""

    def grader(request: ChatRequest) -> Json:
        return grade(criteria, failing=failing, gap=gap, scored=request.is_scored)

    return grader


class Script(NamedTuple):
    """A worker and a grader handler meant to be used together: ``api.worker, api.grader = script``."""

    worker: WorkerHandler
    grader: GraderHandler


def scripted_revision(
    criteria: Sequence[str],
    *,
    first: str = DRAFT_ANSWER,
    second: str = REVISED_ANSWER,
    gap: str = DEFAULT_GAP,
    failing: str | None = None,
) -> Script:
    """Every run's first answer needs exactly one revision.

    The worker answers `first`, and `second` when it is revising: its latest answer in the request
    is `first`, or the latest user message carries the grader's `gap`. The grader fails `failing`
    (default: the first criterion) with `gap` while `first` is the latest answer in what it is
    shown, and passes every criterion once `second` is. Later runs in the same thread start over
    with `first`, so each run shows one failed and one passed iteration.
    """
    if first in second or second in first:
        raise ValueError("first and second answers must not contain each other")
    failed = failing if failing is not None else criteria[0]

    def worker(request: ChatRequest) -> str:
        revising = first in request.last_assistant_text or gap in request.last_user_text
        return second if revising else first

    def grader(request: ChatRequest) -> Json:
        text = request.all_text
        revised = text.rfind(second) > text.rfind(first)
        return grade(criteria, failing=() if revised else (failed,), gap=gap, scored=request.is_scored)

    return Script(worker, grader)
