"""Apply or Cancel on a proposal's message: who may, applying it as the change it holds (a new
rubric version, a calibration drop, the workspace's grader model), each recorded with its replay's
summary and announced; a proposal whose ground moved meanwhile (the rubric changed, the grader model
changed, the example went) is refused, and a proposal is decided once whoever clicks first.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from slack_sdk.web.async_client import AsyncWebClient

from bot.db.proposals import Proposal, ProposalStatus
from bot.db.rubrics import StaleVersion
from bot.db.store import Store
from bot.db.workspace_settings import WorkspaceSettingsRow
from bot.governance.calibration_drops import announce_drop
from bot.governance.changes import announce_change
from bot.governance.editors import RubricEditors, is_workspace_admin
from bot.slack.client import SLACK_ERRORS, attempt
from bot.slack.messages import NO_UNFURLS
from bot.slack.mrkdwn import escape
from bot.workspaces.settings import WorkspaceOverrides

STATUS_WORDS: dict[ProposalStatus, str] = {
    "replaying": "is still being replayed",
    "pending": "is waiting for an editor",
    "applied": "was applied",
    "cancelled": "was cancelled",
    "stale": "no longer applies (what it changes changed meanwhile)",
    "stopped": "was stopped before its replay finished",
}
"""How a proposal's status reads to someone clicking its buttons."""


@dataclass(frozen=True)
class Decided:
    """What a click did: the line the proposal's message now ends with (None: left as it is), and
    what the clicker alone is told (None: nothing)."""

    decision: str | None
    told: str | None = None


@dataclass(frozen=True)
class Deciders:
    """Who may decide, and where the workspace's grader model is kept."""

    store: Store
    editors: RubricEditors
    workspaces: WorkspaceOverrides


async def decide(
    deciders: Deciders, client: AsyncWebClient, proposal: Proposal, user: str, *, apply: bool
) -> Decided:
    """Apply (`apply`) or cancel `proposal` as `user`, if they may and it still waits."""
    if proposal.status != "pending":
        who = f" by <@{proposal.decided_by}>" if proposal.decided_by else ""
        return Decided(None, f"This proposal {STATUS_WORDS[proposal.status]}{who}; nothing was changed.")
    refusal = await _refusal(deciders, client, proposal, user, apply=apply)
    if refusal is not None:
        return Decided(None, refusal)
    status: ProposalStatus = "applied" if apply else "cancelled"
    store, workspace, number = deciders.store, proposal.workspace, proposal.proposal_id
    if not await store.decide_proposal(workspace, number, status, user):
        return Decided(None, "Someone decided this proposal a moment ago; nothing more was changed.")
    if not apply:
        return Decided(f"✖️ Cancelled by <@{user}>: nothing was changed.")
    try:
        stale = await _apply(deciders, client, proposal, user)
    except BaseException:  # nothing was applied: the proposal waits again
        await store.decide_proposal(workspace, number, "pending", user, was=("applied",))
        raise
    if stale is not None:
        await store.decide_proposal(workspace, number, "stale", user, was=("applied",))
        return Decided(
            f"⚠️ Not applied: {stale} Propose it again to replay it against what is in force.", None
        )
    return Decided(f"✅ Applied by <@{user}>.")


async def _refusal(
    deciders: Deciders, client: AsyncWebClient, proposal: Proposal, user: str, *, apply: bool
) -> str | None:
    """Why `user` may not decide: a grader model is the workspace admins' to apply; a channel's
    grading its editors'. The proposer may always cancel their own."""
    if not apply and user == proposal.proposed_by:
        return None
    if proposal.kind != "grader_model":
        return await deciders.editors.refusal(client, proposal.workspace, user)
    try:
        if await is_workspace_admin(client, user):
            return None
    except SLACK_ERRORS:
        return (
            "I couldn't check whether you are an admin of this workspace, so nothing was changed. "
            "Try again in a minute."
        )
    return "Only this workspace's admins and owners may change its grader model, so nothing was changed."


async def _apply(deciders: Deciders, client: AsyncWebClient, proposal: Proposal, user: str) -> str | None:
    """Make the change; why it no longer applies (nothing changed), else None."""
    store, workspace, channel = deciders.store, proposal.workspace, proposal.channel
    if proposal.kind == "rubric" and proposal.candidate is not None:
        try:
            version = await store.set_channel_rubric(
                workspace,
                channel,
                proposal.candidate,
                proposal.proposed_by,
                replay_summary=_applied_summary(proposal, user),
                after_version=int(proposal.base or 0),
            )
        except StaleVersion as exc:
            return (
                f"this channel's rubric changed since it was proposed (version {proposal.base or 0} then, "
                f"{exc.latest} now)."
            )
        await announce_change(client, channel, version)
        return None
    if proposal.kind == "calibration_drop":
        number = int(proposal.candidate or 0)
        summary = _applied_summary(proposal, user)
        dropped = await store.drop_calibration(workspace, channel, number, proposal.proposed_by, summary)
        if dropped is None:
            return f"example {number} was dropped meanwhile or is gone."
        await announce_drop(client, channel, dropped, proposal.proposed_by, summary)
        return None
    return await _apply_grader_model(deciders, client, proposal, user)


async def _apply_grader_model(
    deciders: Deciders, client: AsyncWebClient, proposal: Proposal, user: str
) -> str | None:
    workspaces, workspace = deciders.workspaces, proposal.workspace
    in_force = (await workspaces.models(workspace)).grader
    if in_force != proposal.base:
        return f"the workspace's grader model changed since it was proposed (`{escape(in_force)}` now)."
    stored = await deciders.store.workspace_settings(workspace) or _nothing_set(user)
    # The deployment's model is kept as "the deployment's" (an empty field), as the form saves it.
    chosen = None if proposal.candidate == workspaces.deployment.grader_model else proposal.candidate
    await workspaces.save(
        workspace, replace(stored, grader_model=chosen, updated_by=user, updated_at=datetime.now(UTC))
    )
    now = (await workspaces.models(workspace)).grader
    text = (
        f"📝 <@{user}> applied <@{proposal.proposed_by}>'s change of this workspace's grader model: "
        f"`{escape(now)}` from the next request on. Before it applied: {proposal.summary or 'no replay'}."
    )
    await attempt(
        client.chat_postMessage(channel=proposal.channel, text=text, **NO_UNFURLS),
        f"announce the grader model in {proposal.channel}",
    )
    return None


def _nothing_set(user: str) -> WorkspaceSettingsRow:
    """A workspace's settings where its admins set nothing (every one the deployment's)."""
    return WorkspaceSettingsRow(None, None, None, None, None, user, datetime.now(UTC))


def _applied_summary(proposal: Proposal, user: str) -> str:
    """The history's line: the replay's summary and who applied it."""
    return f"{proposal.summary or 'no replay'} · applied by <@{user}>"
