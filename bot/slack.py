"""Slack Web API plumbing shared by the runner and the listeners."""

from __future__ import annotations

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError

SLACK_ERRORS: tuple[type[Exception], ...] = (SlackApiError, aiohttp.ClientError, TimeoutError)
"""What a Slack Web API call raises once the client's own retries are used up."""

UPLOAD_ERRORS: tuple[type[Exception], ...] = (*SLACK_ERRORS, SlackClientError)
"""What a file upload can raise: a Web API failure, or the upload step between its calls failing."""


def slack_error(exc: Exception) -> str:
    """Slack's error code for a failed call (never the request's token), else the exception's type."""
    return str(exc.response.get("error")) if isinstance(exc, SlackApiError) else type(exc).__name__
