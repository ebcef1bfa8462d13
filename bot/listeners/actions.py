"""Button clicks on the bot's messages.

The review buttons (Agree / Disagree…) on evaluation messages belong to the team-review feature;
until it is in place a click is acknowledged so Slack does not show the user an error.
"""

from __future__ import annotations

from slack_bolt.async_app import AsyncAck, AsyncApp

from bot import render


def register(app: AsyncApp) -> None:
    """Listen to the review buttons."""
    for action_id in (render.AGREE_ACTION_ID, render.DISAGREE_ACTION_ID):
        app.action(action_id)(acknowledge)


async def acknowledge(ack: AsyncAck) -> None:
    """Answer Slack within its 3-second window."""
    await ack()
