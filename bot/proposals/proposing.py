"""Holding a change for its replay: the proposal is stored, its replay runs in the background (one
task per proposal, stopped with the bot), and the result is posted in the channel with Apply and
Cancel. A change in a place without trusted reviews is not held: the caller applies it at once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace

from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.channel_replay import ChannelReplays
from bot.db.proposals import Proposal, ProposalKind
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.proposals.messages import proposal_message
from bot.proposals.replaying import (
    changed_by,
    iterations_of,
    replay_proposal,
    summary_line,
    trusted_cases,
    trusted_in,
)
from bot.slack.blocks import plural
from bot.slack.client import attempt
from bot.slack.messages import NO_UNFURLS
from bot.slack.notices import log_failure, reference_words
from bot.vocabulary.workspace import Workspace

logger = logging.getLogger(__name__)

LABELS = ("the verdicts the team reviewed", "the proposal")
"""How the two sides of a proposal's replay are named."""

NOTHING_REPLAYED = "nothing could be replayed (the reviewed conversations are no longer stored)"
"""The summary of a replay that found no reviewed case's transcript."""

Tell = Callable[[str], Awaitable[None]]
"""Tells the proposer alone: ``await tell(text)``."""


class Proposals:
    """Replays proposed changes in the background and offers each in its channel."""

    def __init__(self, store: Store, replays: ChannelReplays) -> None:
        self._store = store
        self._replays = replays
        self._tasks: set[asyncio.Task[None]] = set()

    async def propose(
        self,
        *,
        workspace: Workspace,
        channel: str,
        user: str,
        kind: ProposalKind,
        candidate: str | None,
        base: str | None,
        client: AsyncWebClient,
        tell: Tell,
        across_workspace: bool = False,
    ) -> str | None:
        """Hold the change for a replay against the trusted reviews of `channel` (`across_workspace`:
        of every channel of the workspace) and say so to the proposer; None (holding nothing) when
        there are none: the caller applies the change at once."""
        where = None if across_workspace else channel
        trusted = await trusted_in(self._store, workspace, where)  # one query: the caller acks after it
        if not trusted:
            return None
        proposal = await self._store.add_proposal(workspace, channel, kind, candidate, base, user)
        task = asyncio.create_task(
            self._replay_and_offer(proposal, where, trusted, client, tell),
            name=f"proposal {proposal.proposal_id}",
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        iterations = plural(iterations_of(trusted), "reviewed iteration")
        return (
            f"Nothing is changed yet: I'm replaying the change on {iterations} "
            f"with trusted reviews. The result will be posted in <#{channel}> with *Apply* and *Cancel*; "
            "it applies only once an editor clicks Apply."
        )

    async def drain(self) -> None:
        """Stop every replay still running (the bot is stopping); each channel is told."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _replay_and_offer(
        self,
        proposal: Proposal,
        where: str | None,
        trusted: Sequence[ReviewRow],
        client: AsyncWebClient,
        tell: Tell,
    ) -> None:
        try:
            found = await trusted_cases(self._store, proposal.workspace, where, trusted)
            cases = [case for case in found if changed_by(proposal, case)]
            replayed = await replay_proposal(self._replays, proposal, cases, LABELS)
            summary = NOTHING_REPLAYED if replayed is None else summary_line(replayed.comparison)
            message = proposal_message(replace(proposal, summary=summary), replayed)
            await self._store.replayed_proposal(proposal.workspace, proposal.proposal_id, summary)
            posted = await attempt(
                client.chat_postMessage(channel=proposal.channel, **message, **NO_UNFURLS),
                f"offer proposal {proposal.proposal_id} in {proposal.channel}",
            )
            if posted is not None:
                await self._store.offered_proposal(
                    proposal.workspace, proposal.proposal_id, str(posted["ts"])
                )
            else:  # no one can click it: it is withdrawn
                await self._store.decide_proposal(
                    proposal.workspace, proposal.proposal_id, "stopped", proposal.proposed_by
                )
                await tell(
                    "The replay is done but I couldn't post it in the channel, so nothing was changed. "
                    "If I'm not in it, invite me with `/invite @rubric-bot` and propose the change again."
                )
        except asyncio.CancelledError:
            await self._stopped(proposal, client, "because the bot is restarting")
            raise
        except Exception as exc:
            reference = log_failure(logger, f"the replay of proposal {proposal.proposal_id} failed", exc)
            await self._stopped(proposal, client, f"by an error. {reference_words(reference)}")

    async def _stopped(self, proposal: Proposal, client: AsyncWebClient, why: str) -> None:
        await asyncio.shield(
            self._store.decide_proposal(
                proposal.workspace, proposal.proposal_id, "stopped", proposal.proposed_by, was=("replaying",)
            )
        )
        stopped = client.chat_postMessage(
            channel=proposal.channel,
            **NO_UNFURLS,
            text=f"The replay of the change <@{proposal.proposed_by}> proposed was stopped {why} "
            "Nothing was changed: propose it again to replay it.",
        )
        await attempt(stopped, f"tell {proposal.channel} its proposal's replay stopped")


@asynccontextmanager
async def open_proposals(store: Store, replays: ChannelReplays) -> AsyncIterator[Proposals]:
    """The proposals of a serving process; closing stops the replays still running (each channel is
    told, and its proposal is marked stopped)."""
    proposals = Proposals(store, replays)
    try:
        yield proposals
    finally:
        await proposals.drain()
