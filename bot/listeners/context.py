"""How listeners reach the bot's services: a global middleware puts them in the Bolt context."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from slack_bolt.async_app import AsyncBoltContext

from bot.config import Settings
from bot.runner import ThreadRunner
from bot.store import Store

SERVICES_KEY = "rubric_bot_services"
"""Where `Services` lives in each request's Bolt context."""


@dataclass(frozen=True)
class Services:
    """What listeners work with: settings, the bot's tables, and the thread runner."""

    settings: Settings
    store: Store
    runner: ThreadRunner

    async def attach(self, context: AsyncBoltContext, next: Callable[[], Awaitable[None]]) -> None:
        """Bolt global middleware: make these services available to every listener."""
        context[SERVICES_KEY] = self
        await next()


def services_of(context: AsyncBoltContext) -> Services:
    """The bot's services for this request."""
    return context[SERVICES_KEY]
