"""Bolt listeners: Slack events, the /rubric command, button clicks and modal submissions.

Every listener acks once what it was asked is recorded (queued, saved), so that a request the
database could not take is answered with an error and Slack can send it again; anything slow goes
to the `ThreadRunner`. Listeners reach the bot's services with `services_of(context)`. This
module's `register` attaches them all.

- ``events``: messages and mentions (is it for the bot? dedupe, queue) and the Home tab opening.
- ``rubric_command``: the `/rubric` slash command: its table of subcommands and their handlers.
- ``command_text``: the text typed after `/rubric`: which subcommand and its argument (pure).
- ``actions``: the review buttons: Agree records a review, Disagree… opens the form.
- ``views``: modal submissions: the channel-rubric editor and the review form.
- ``assistant``: the assistant pane: it opened, its channel changed, a suggested question asked in it.
- ``context``: how listeners reach the bot's services through the Bolt context.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncApp

from bot.listeners import actions, assistant, events, rubric_command, views
from bot.listeners.context import Services
from bot.slack.text import clean_request


def register(app: AsyncApp, services: Services) -> None:
    """Attach the services and every listener to `app`."""
    app.use(clean_request)  # first: no listener or middleware of the bot's sees unwritable text
    app.use(services.attach)
    # The assistant's first: Bolt gives an event to the first listener that matches it.
    for module in (assistant, events, rubric_command, actions, views):
        module.register(app)
