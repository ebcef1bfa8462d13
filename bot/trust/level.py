"""`/rubric trust`: a channel's trust level, shown to anyone and changed by an editor.

A change is a change of how the channel is graded: only editors may make it (the listener checks),
it is announced in the channel, `/rubric history` keeps every one, and the thresholds are worked out
at once from the reviews already saved.
"""

from __future__ import annotations

from collections.abc import Sequence

from slack_sdk.models.blocks import Block
from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.presentation import slack_name
from bot.db.store import Store
from bot.db.trust import TrustLevel, TrustThreshold
from bot.governance.changes import NOT_ANNOUNCED
from bot.slack.blocks import block_dicts, context_block, plural, section_block
from bot.slack.client import attempt
from bot.slack.messages import NO_UNFURLS, SlackMessage
from bot.slack.mrkdwn import slack_date
from bot.trust.thresholds import recalibrate
from bot.vocabulary.workspace import Workspace
from grading.selective import min_kept

LEVELS_IN_HISTORY = 10
"""Trust level changes `/rubric history` lists, newest first."""

WHAT_TRUST_DOES = (
    "Per criterion, the grader acts alone only on verdicts whose confidence clears a threshold "
    "recalibrated from this channel's trusted reviews (trusted as calibration trusts them) "
    "each time one is saved; the others are left to people as “can't tell”. A criterion runs as before "
    "until its reviews allow a threshold. `/rubric report` shows each threshold, the coverage and the "
    "agreement observed."
)
"""What a trust level does, said with it."""


def level_words(target: float | None) -> str:
    """E.g. ``90%`` or ``off``."""
    return "off" if target is None else f"{target:.0%}"


async def change_trust(
    store: Store,
    client: AsyncWebClient,
    *,
    workspace: Workspace,
    channel: str,
    user: str,
    target: float | None,
    risk: float,
) -> str:
    """Set the channel's trust level to `target` (None: off) as `user`'s change, work out its
    thresholds, announce it in the channel, and say what happened (only `user` sees that)."""
    current = await store.trust_levels(workspace, channel, 1)
    if (current[0].target if current else None) == target:
        return f"This channel's trust level is {level_words(target)} already; nothing was changed."
    await store.set_trust_level(workspace, channel, target, user)
    thresholds = await recalibrate(store, workspace, channel, risk)
    posted = await attempt(
        client.chat_postMessage(channel=channel, **announcement(target, user), **NO_UNFURLS),
        f"announce the trust level in {channel}",
    )
    done = f"Trust level {level_words(target)}." + (
        f" {thresholds_words(thresholds, target, risk)}" if target is not None else ""
    )
    return done + (" Announced in this channel." if posted is not None else NOT_ANNOUNCED)


def announcement(target: float | None, user: str) -> SlackMessage:
    """The channel's message about a trust level change: who set what."""
    if target is None:
        line = f"<@{user}> turned the grader's trust level off: it acts on all its verdicts again."
    else:
        line = (
            f"<@{user}> set the grader's trust level to {level_words(target)}: its verdicts are acted "
            f"on alone only where this channel's reviews show they agree with people at least {target:.0%} "
            "of the time."
        )
    return {
        "text": line,
        "blocks": block_dicts(
            [
                section_block(f"🛡️ {line}"),
                context_block("`/rubric history` keeps it; `/rubric trust` shows it."),
            ]
        ),
    }


def thresholds_words(thresholds: Sequence[TrustThreshold], target: float, risk: float) -> str:
    """How many criteria have a threshold, and what the others need."""
    ready = [t for t in thresholds if t.threshold is not None]
    fewest = min_kept(target, risk)
    text = f"{len(ready)} of {plural(len(thresholds), 'criterion', 'criteria')} have a threshold"
    return text + (
        f"; a criterion needs at least {plural(fewest, 'trusted review')} of its verdicts for one."
        if len(ready) < len(thresholds) or not thresholds
        else "."
    )


def level_message(
    level: TrustLevel | None, thresholds: Sequence[TrustThreshold], risk: float
) -> SlackMessage:
    """`/rubric trust`: the channel's level, who set it, and each criterion's threshold."""
    target = level.target if level else None
    if target is None:
        text = (
            "Trust is *off* in this channel: the grader acts on every verdict it gives. "
            "`/rubric trust 0.9` (an editor) makes it act alone only where the team's reviews show "
            "its verdicts agree with people 90% of the time."
        )
        return {"text": text, "blocks": block_dicts([section_block(text)])}
    assert level is not None
    head = (
        f"Trust level *{level_words(target)}* in this channel (risk {risk:g}), set by <@{level.set_by}> "
        f"on {slack_date(level.created_at)}. {thresholds_words(thresholds, target, risk)}"
    )
    lines = [_threshold_line(t) for t in thresholds if t.target == target]
    blocks: list[Block] = [section_block(head)]
    if lines:
        blocks.append(section_block("\n".join(lines)))
    blocks += [context_block(WHAT_TRUST_DOES + " `/rubric trust off` turns it off.")]
    return {"text": head, "blocks": block_dicts(blocks)}


def _threshold_line(threshold: TrustThreshold) -> str:
    name = slack_name(threshold.name)
    reviews = plural(threshold.reviews, "trusted review")
    if threshold.threshold is None:
        return f"• *{name}* — no threshold yet ({reviews}): all its verdicts are acted on"
    return f"• *{name}* — confidence ≥ {threshold.threshold:.2f} acted on ({reviews})"


def levels_history(levels: Sequence[TrustLevel]) -> str | None:
    """The history's lines on trust level changes, newest first; None without any."""
    if not levels:
        return None
    lines = [
        f"{level_words(level.target)} · <@{level.set_by}> · {slack_date(level.created_at)}"
        for level in levels
    ]
    return "*Trust levels*\n" + "\n".join(lines)
