"""Slack plumbing shared by every feature: how the bot talks to Slack and what Slack sends it.

- ``client``: the bot's Web API client, what its calls raise, and reporting a failed call.
- ``notices``: failure notices without an exception's text: plain words and a log reference.
- ``http``: the signed-request HTTP app Slack posts events, commands and interactivity to.
- ``socket_mode``: check the tokens, connect, stay connected, stop when asked.
- ``blocks``: Block Kit limits and the generic builders every surface renders with.
- ``messages``: the typed message (text, blocks, metadata) every renderer returns.
- ``mrkdwn``: the bot's own mrkdwn text: escaping, truncation, splitting.
- ``markdown``: model-written Markdown for ``markdown`` blocks: mentions kept inert, split to limits.
- ``conversation``: which Slack messages are requests to the bot (or deletions and edits of one), read
  from their events, and the text of a Slack message as the bot reads it.
- ``members``: who is in which channel, and the bot's own user id.
- ``text``: text cleaned where it enters the bot (no NUL, no lone surrogate), and the Bolt
  middleware that cleans every request's payload.
- ``payloads``: inbound interactivity payloads (clicks, modal submissions) as pydantic models.
"""
