"""Grading changes held until an editor applies them (``change_proposals``, see `bot.proposals`):
each is written as its replay starts, completed with the replay's summary and the message offering
Apply/Cancel, and decided once — a decision is a conditional update, so two clicks cannot both win.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from sqlalchemy import insert, select, update

from bot.db.base import StoreBase
from bot.db.schema import change_proposals
from bot.db.scope import channel_columns, in_workspace, utc_now
from bot.vocabulary.workspace import NO_ENTERPRISE, Workspace

ProposalKind = Literal["rubric", "grader_model", "calibration_drop"]
"""What a proposal changes: the channel's default rubric, its workspace's grader model, or which
calibration examples the grader is shown."""

ProposalStatus = Literal["replaying", "pending", "applied", "cancelled", "stale", "stopped"]
"""Where a proposal stands: its replay running; waiting for Apply/Cancel; applied; cancelled; refused
at Apply because what it was proposed against changed meanwhile; its replay stopped by a restart."""


@dataclass(frozen=True)
class Proposal:
    """A proposed change of how a channel is graded, and what became of it."""

    proposal_id: int
    team: str
    channel: str
    kind: ProposalKind
    candidate: str | None
    """The rubric text, the ``provider:model`` (None: the deployment's), or the review id dropped."""
    base: str | None
    """What it was proposed against: the rubric's latest version number, the grader model in force."""
    proposed_by: str
    status: ProposalStatus
    summary: str | None
    message_ts: str | None
    decided_by: str | None
    created_at: datetime
    enterprise: str = NO_ENTERPRISE

    @property
    def workspace(self) -> Workspace:
        return Workspace(self.team, self.enterprise)


_COLUMNS = [change_proposals.c[name] for name in Proposal.__dataclass_fields__]


class ProposalStore(StoreBase):
    """Proposed changes of how channels are graded."""

    async def add_proposal(
        self,
        workspace: Workspace,
        channel: str,
        kind: ProposalKind,
        candidate: str | None,
        base: str | None,
        by: str,
    ) -> Proposal:
        """Record ``by``'s proposal, its replay about to start."""
        values = {
            **channel_columns(workspace, channel),
            "kind": kind,
            "candidate": candidate,
            "base": base,
            "proposed_by": by,
            "status": "replaying",
            "created_at": utc_now(),
        }
        async with self._write() as connection:
            found = await connection.execute(
                insert(change_proposals).values(**values).returning(change_proposals.c.proposal_id)
            )
            proposal_id = found.scalar_one()
        return await self._proposal_or_fail(workspace, proposal_id)

    async def proposal(self, workspace: Workspace, proposal_id: int) -> Proposal | None:
        """The workspace's proposal ``proposal_id``; None if it has none by that number."""
        query = select(*_COLUMNS).where(
            *in_workspace(change_proposals, workspace), change_proposals.c.proposal_id == proposal_id
        )
        rows = await self._rows(query)
        return Proposal(**rows[0]) if rows else None

    async def replayed_proposal(self, workspace: Workspace, proposal_id: int, summary: str) -> None:
        """The proposal's replay is done (its `summary`): it waits for Apply or Cancel, which may come
        as soon as its message is posted."""
        await self._update(workspace, proposal_id, ("replaying",), status="pending", summary=summary)

    async def offered_proposal(self, workspace: Workspace, proposal_id: int, message_ts: str) -> None:
        """Where the proposal's message offering Apply and Cancel was posted."""
        await self._update(workspace, proposal_id, ("pending",), message_ts=message_ts)

    async def decide_proposal(
        self,
        workspace: Workspace,
        proposal_id: int,
        status: ProposalStatus,
        by: str,
        *,
        was: tuple[ProposalStatus, ...] = ("pending",),
    ) -> bool:
        """Mark the proposal `status` by `by` if it stands at one of `was`; whether it did (False: it was
        decided meanwhile)."""
        return await self._update(
            workspace, proposal_id, was, status=status, decided_by=by, decided_at=utc_now()
        )

    async def _update(
        self, workspace: Workspace, proposal_id: int, was: tuple[ProposalStatus, ...], **values: object
    ) -> bool:
        table = change_proposals
        statement = (
            update(table)
            .where(
                *in_workspace(table, workspace), table.c.proposal_id == proposal_id, table.c.status.in_(was)
            )
            .values(**values)
        )
        async with self._write() as connection:
            return (await connection.execute(statement)).rowcount == 1

    async def _proposal_or_fail(self, workspace: Workspace, proposal_id: int) -> Proposal:
        found = await self.proposal(workspace, proposal_id)
        if found is None:
            raise LookupError(f"proposal {proposal_id} was not saved")
        return found
