"""Bolt listeners: Slack events, the /rubric command, button clicks and modal submissions.

Every listener acks at once; anything slow goes to the `ThreadRunner`. Listeners reach the bot's
services with `services_of(context)`.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.listeners import actions, events, rubric_command, views
from bot.listeners.context import Services


def register(app: AsyncApp, services: Services) -> None:
    """Attach the services and every listener to `app`."""
    app.use(services.attach)
    for module in (events, rubric_command, actions, views):
        module.register(app)
