"""Agent sessions closed with their threads: each run was an agent session of its thread in Slack
(`bot.sessions`), left ``active`` when it ended; when the thread's data is deleted (a purge,
retention) its session is set ``closed`` before the data goes, with the workspace's token.

Only threads the bot ran a request in had a session, so only those are called. Slack is never in
the way of a deletion: a session Slack would not close (a workspace without agent sessions, Slack
unreachable, no token at hand) is counted in one log line per workspace, and the data goes anyway.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from itertools import groupby

from bot.lifecycle.uploads import ClientFor
from bot.sessions.status import close_session
from bot.slack.client import SLACK_ERRORS, call_each, describe_error
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace, tenant_words

logger = logging.getLogger(__name__)


async def close_sessions(clients: ClientFor | None, threads: Sequence[ThreadKey]) -> int:
    """Set the agent session of each of `threads` ``closed`` in Slack, with its workspace's token
    from `clients` (None: no Slack at hand); how many Slack closed."""
    closed = 0
    ordered = sorted(threads, key=lambda thread: (thread.enterprise, thread.team))
    for workspace, in_workspace in groupby(ordered, key=lambda thread: thread.workspace):
        sessions = list(in_workspace)
        done, problem = await _close_in(workspace, clients, sessions)
        closed += len(done)
        if left := len(sessions) - len(done):
            logger.warning(
                "could not close %d agent session(s) of %s in Slack (%s); their threads' data is "
                "deleted all the same",
                left,
                tenant_words(workspace),
                problem,
            )
    return closed


async def _close_in(
    workspace: Workspace, clients: ClientFor | None, sessions: list[ThreadKey]
) -> tuple[list[ThreadKey], str]:
    """The sessions of `workspace` Slack closed, and why it did not close the others."""
    if clients is None:
        return [], "no Slack token at hand"
    try:
        client = await clients(workspace)
    except SLACK_ERRORS as exc:  # an expiring token Slack would not refresh
        return [], describe_error(exc)
    if client is None:
        return [], "the bot is no longer installed there"
    return await call_each(sessions, lambda thread: close_session(client, thread))
