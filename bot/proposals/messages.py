"""How a proposed change reads in Slack: the replay per criterion (agreement and κ before → after,
the 95 % bootstrap interval of each difference, each with its count, nothing under the minimum
count), the verdicts that flip (linked to their iterations, the candidate's words fenced), and the
Apply / Cancel buttons; then what became of it."""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import ActionsBlock, Block, ButtonElement

from bot.agreement import presentation as kit
from bot.agreement.comparison import CriterionComparison, Flip
from bot.db.evaluations import EvaluationRecord
from bot.db.proposals import Proposal
from bot.proposals.replaying import Replayed, agreement_change, signed
from bot.slack.blocks import block_dicts, code, context_block, header_block, plural, section_block, sections
from bot.slack.messages import BlockJson, SlackMessage
from bot.slack.mrkdwn import escape, truncate
from grading.agreement import MIN_REVIEWS_FOR_KAPPA

APPLY_ACTION_ID = "proposal_apply"
"""The Apply button's action id; its value is the proposal's number."""

CANCEL_ACTION_ID = "proposal_cancel"
"""The Cancel button's action id; its value is the proposal's number."""

DECISION_BLOCK_ID = "proposal_decision"
"""The block of the Apply / Cancel buttons, replaced by the decision once one is made."""

FLIPS_SHOWN = 10
"""Flipped verdicts listed in the message; the rest are counted."""

GAP_SHOWN = 200
"""Characters of the candidate's words on a flipped verdict shown (fenced: a model's text)."""


def what_words(proposal: Proposal) -> str:
    """What the proposal changes, e.g. ``a new default rubric for this channel``."""
    if proposal.kind == "rubric":
        return "a new default rubric for this channel"
    if proposal.kind == "grader_model":
        model = proposal.candidate or "the deployment's grader model"
        was = escape(proposal.base or "")
        return f"the grader model of this workspace: `{escape(model)}` instead of `{was}`"
    return f"taking example {proposal.candidate} out of this channel's calibration"


def proposal_message(proposal: Proposal, replayed: Replayed | None) -> SlackMessage:
    """The message offering the change: what it is, who proposed it, the replay, Apply and Cancel."""
    what = what_words(proposal)
    blocks: list[Block] = [
        header_block("Proposed grading change"),
        section_block(
            f"<@{proposal.proposed_by}> proposes {what}. Nothing changes until an editor applies it."
        ),
    ]
    if proposal.kind == "rubric" and proposal.candidate is not None:
        blocks.append(section_block(code(proposal.candidate)))
    if replayed is None:
        blocks.append(section_block(NO_HISTORY))
    else:
        blocks += _replay_blocks(replayed)
    blocks.append(decision_buttons(proposal.proposal_id))
    summary = proposal.summary or "no replay"
    return {"text": f"<@{proposal.proposed_by}> proposes {what} ({summary}).", "blocks": block_dicts(blocks)}


NO_HISTORY = (
    "The reviewed iterations' conversations are no longer stored, so none could be replayed: "
    "there is nothing to compare."
)
"""Said in place of the replay when no reviewed case's transcript is left."""


def _replay_blocks(replayed: Replayed) -> list[Block]:
    comparison = replayed.comparison
    blocks: list[Block] = [
        context_block(
            f"Replayed on the trusted reviews: {comparison.summary()} · the verdicts the team reviewed → "
            "the proposal's"
        )
    ]
    if comparison.stopped_at_budget:
        blocks.append(
            section_block(
                "⚠️ The replay stopped at today's budget: the figures below are on what it graded "
                "before it stopped. You can still apply or cancel."
            )
        )
    rows = [*comparison.criteria, *comparison.overall]
    if rows:
        blocks += sections("\n".join(map(criterion_line, rows)))
    else:
        blocks.append(section_block("No reviewed verdict could be compared."))
    if comparison.flips:
        blocks += sections(flips_text(replayed))
    blocks.append(
        context_block(
            f"Agreement: share of the team's trusted verdicts matched; κ: agreement beyond chance. "
            f"Both are shown from {MIN_REVIEWS_FOR_KAPPA} verdicts, with the bootstrap 95 % interval "
            "of the change (whole iterations resampled)."
        )
    )
    return blocks


def criterion_line(row: CriterionComparison) -> str:
    """E.g. ``*Is polite* (pass/fail) — agreement 0.74→0.95 (+0.21, 95 % +0.05…+0.37) on 19
    verdicts · κ 0.00→0.85 (+0.85, 95 % …)``; under the minimum count, the count and what it needs."""
    name = f"*{kit.slack_name(row.criterion)}* ({row.kind})"
    if not row.before.enough:
        return f"{name} — {plural(row.n, 'verdict')}: too few to read; figures need {MIN_REVIEWS_FOR_KAPPA}"
    facts = [agreement_change(row)]
    was, now = kit.shown_kappa(row.before), kit.shown_kappa(row.after)
    if was is not None and now is not None and row.kappa_interval is not None:
        low, high = row.kappa_interval
        facts.append(f"κ {was:.2f}→{now:.2f} ({signed(now - was)}, 95 % {signed(low)}…{signed(high)})")
    else:
        facts.append(f"_{row.before.note or row.after.note or 'κ undefined'}_")
    return f"{name} — {' · '.join(facts)}"


def flips_text(replayed: Replayed) -> str:
    """The flipped verdicts: where (a link to the iteration), what, the team's verdict, the
    candidate's words fenced."""
    flips = replayed.comparison.flips
    fixed = sum(f.effect == "fixed" for f in flips)
    broken = sum(f.effect == "broken" for f in flips)
    lines = [f"*Flips ({len(flips)})* — {fixed} now match the team, {broken} no longer do:"]
    records = {case.key: case.record for case in (r.case for r in replayed.regrades)}
    for flip in flips[:FLIPS_SHOWN]:
        lines.append(_flip_line(flip, records.get((flip.grading_run_id, flip.iteration)), replayed))
    if len(flips) > FLIPS_SHOWN:
        lines.append(f"…and {plural(len(flips) - FLIPS_SHOWN, 'more')}")
    return "\n".join(lines)


def _flip_line(flip: Flip, record: EvaluationRecord | None, replayed: Replayed) -> str:
    where = f"iteration {flip.iteration + 1} of run `{flip.grading_run_id}`"
    if record is not None:
        where = f"<{kit.message_link(record.channel, record.message_ts, record.thread_ts)}|{where}>"
    team = "/".join(flip.team)
    line = f"• {where} · *{kit.slack_name(flip.criterion)}*: {flip.before} → {flip.after} (team: {team})"
    said = replayed.gap((flip.grading_run_id, flip.iteration), flip.criterion)
    return f"{line}\n{code(truncate(said, GAP_SHOWN))}" if said else line


def decision_buttons(proposal_id: int) -> ActionsBlock:
    """Apply (editors only) and Cancel."""
    value = str(proposal_id)
    return ActionsBlock(
        block_id=DECISION_BLOCK_ID,
        elements=[
            ButtonElement(text="Apply", action_id=APPLY_ACTION_ID, value=value, style="primary"),
            ButtonElement(text="Cancel", action_id=CANCEL_ACTION_ID, value=value),
        ],
    )


def decided_blocks(shown: Sequence[BlockJson], decision: str) -> list[BlockJson]:
    """The proposal's message as shown, its buttons replaced by the `decision`."""
    kept = [block for block in shown if block.get("block_id") != DECISION_BLOCK_ID]
    return [*kept, *block_dicts([section_block(decision)])]
