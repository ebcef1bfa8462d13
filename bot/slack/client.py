"""Slack Web API plumbing: the bot's client, what its calls raise, and how a failed call is reported.

A Web API call whose failure should not end the work (posting in a thread, a thread status, a
form, a tally) goes through `attempt`, which logs Slack's error code. Listeners use it too rather
than raising: Bolt's asyncio runner loses a listener's ack when the listener raises within its
10 ms poll for the ack (Slack then gets a 404 after 3 s). Anything else a listener raises, a bug,
goes to Bolt's error handler, `log_listener_failure` (registered with ``@app.error``).
"""

from __future__ import annotations

import logging
import random
from collections.abc import Awaitable, Callable, Collection, Sequence
from http import HTTPStatus
from typing import Any, TypeVar

import aiohttp
from prometheus_client import Counter
from slack_bolt.response import BoltResponse
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.builtin_async_handlers import (
    AsyncConnectionErrorRetryHandler,
    AsyncRateLimitErrorRetryHandler,
    AsyncServerErrorRetryHandler,
)
from slack_sdk.http_retry.builtin_interval_calculators import BackoffRetryIntervalCalculator
from slack_sdk.http_retry.jitter import Jitter
from slack_sdk.web.async_client import AsyncWebClient

from bot.config import Settings
from bot.db.database import describe_database_error, unavailable_error

logger = logging.getLogger(__name__)

T = TypeVar("T")

FAILED_CALLS = Counter("rubric_bot_slack_errors", "Slack Web API calls that failed after their retries")
"""Web API calls that failed for good (served on `/metrics` with the bot's other counters)."""

SLACK_RETRIES = 3
"""Retries per Web API call for each kind of transient failure: 429s (after their Retry-After),
5xx answers and dropped connections."""

SLACK_ERRORS: tuple[type[Exception], ...] = (SlackClientError, aiohttp.ClientError, TimeoutError)
"""What a Slack Web API call (or a file upload's step between calls) raises once the client's own
retries are used up: Slack's ``ok: false`` answers are `SlackApiError`, a `SlackClientError`."""


def build_client(settings: Settings, session: aiohttp.ClientSession | None = None) -> AsyncWebClient:
    """The bot's Web API client: `SLACK_API_URL`, with retries for rate limits and transient errors."""
    token = settings.slack_bot_token.get_secret_value() if settings.slack_bot_token else None
    backoff = BackoffRetryIntervalCalculator(
        backoff_factor=settings.slack_retry_backoff, jitter=ScaledJitter(settings.slack_retry_backoff)
    )
    return AsyncWebClient(
        token=token,
        base_url=settings.slack_api_url,
        session=session,
        retry_handlers=[
            AsyncRateLimitErrorRetryHandler(max_retry_count=SLACK_RETRIES),
            AsyncServerErrorRetryHandler(max_retry_count=SLACK_RETRIES, interval_calculator=backoff),
            AsyncConnectionErrorRetryHandler(max_retry_count=SLACK_RETRIES, interval_calculator=backoff),
        ],
    )


class ScaledJitter(Jitter):
    """A random wait added to each retry's, up to twice the backoff: slack_sdk's default (up to 1 s)
    at the default backoff of 0.5 s, shorter with a shorter backoff."""

    def __init__(self, backoff: float) -> None:
        self._spread = 2 * backoff

    def recalculate(self, duration: float) -> float:
        return duration + random.random() * self._spread


def describe_error(exc: BaseException) -> str:
    """Slack's error code for a failed Slack call (a response never holds the token), else the
    exception's type and message."""
    if isinstance(exc, SlackApiError):
        return str(exc.response.get("error"))
    detail = str(exc).strip()
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


async def call_each(
    items: Sequence[T], call: Callable[[T], Awaitable[object]], *, done_anyway: Collection[str] = ()
) -> tuple[list[T], str]:
    """Make `call` (one Slack call) for each of `items` in turn: the items Slack did (or refused with
    an error of `done_anyway`, which means there was nothing left to do), and the reason Slack gave
    for the last one it refused ("" if none). Once Slack cannot be reached it stops: the rest would
    fail alike."""
    done: list[T] = []
    problem = ""
    for item in items:
        try:
            await call(item)
        except SlackApiError as exc:
            if exc.response.get("error") not in done_anyway:
                problem = describe_error(exc)
                continue
        except SLACK_ERRORS as exc:
            return done, describe_error(exc)
        done.append(item)
    return done, problem


def refused_for_now(exc: BaseException) -> bool:
    """Whether a failed call may succeed if made again later: Slack answered 5xx, or 429 beyond the
    client's own retries, or could not be reached at all (``ok: false`` answers are final)."""
    if isinstance(exc, SlackApiError):
        status = exc.response.status_code
        return status == HTTPStatus.TOO_MANY_REQUESTS or status >= HTTPStatus.INTERNAL_SERVER_ERROR
    return isinstance(exc, SLACK_ERRORS)


async def attempt(call: Awaitable[T], what: str) -> T | None:
    """Await a Web API call; None when it failed, logged as ``could not {what}`` with Slack's code."""
    try:
        return await call
    except SLACK_ERRORS as exc:
        FAILED_CALLS.inc()
        logger.warning("could not %s: %s", what, describe_error(exc))
        return None


LISTENER_UNAVAILABLE_STATUS = 503
"""Slack's answer to a request the database could not take: not a 2xx, so Slack delivers an event
again (and in Socket Mode the envelope is not acked, which has the same effect)."""


async def log_listener_failure(
    error: Exception, body: dict[str, Any], response: BoltResponse | None = None
) -> BoltResponse | None:
    """Bolt's error handler (``@app.error``, for listeners and middleware): log what one raised,
    naming the request.

    A database that could not take the request is one ERROR line, and, if it had not been acked
    yet (events are taken by listener middleware, before Bolt acks them), Slack is answered
    `LISTENER_UNAVAILABLE_STATUS` so that it delivers the request again. A Slack call that failed
    is a warning with Slack's error code; anything else is a bug, logged with its traceback.
    """
    request = _request_name(body)
    if (failure := unavailable_error(error)) is not None:
        logger.error(
            "could not take %s: the database is unavailable (%s)", request, describe_database_error(failure)
        )
        return BoltResponse(status=LISTENER_UNAVAILABLE_STATUS, body="") if response is not None else None
    if isinstance(error, SLACK_ERRORS):
        FAILED_CALLS.inc()
        logger.warning("Slack call failed while handling %s: %s", request, describe_error(error))
    else:
        logger.error("handling %s failed", request, exc_info=error)
    return None


def _request_name(body: dict[str, Any]) -> str:
    """E.g. ``block_actions review_agree``, ``/rubric``, ``event app_home_opened``."""
    if "command" in body:
        return str(body["command"])
    if isinstance(body.get("event"), dict):
        return f"event {body['event'].get('type')}"
    actions = body.get("actions") or [{}]
    callback = (body.get("view") or {}).get("callback_id")
    detail = actions[0].get("action_id") if body.get("type") == "block_actions" else callback
    return " ".join(str(part) for part in (body.get("type"), detail) if part)
