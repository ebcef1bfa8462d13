"""The App Home tab: for each channel the viewer shares with the bot, the channel's default rubric,
its recent graded runs, what they cost and how far the grader agrees with the team — the agreement
report with its chart — where a team lead looks without typing a command.

It is published with ``views.publish`` each time someone opens the tab (``app_home_opened``).
The viewer's channels come from ``users.conversations``: those the viewer is in and the bot is in.

The chart is an ``image`` block whose ``slack_file`` names a PNG the bot uploaded without sharing
it anywhere. A Home tab cannot carry a file share the way the channel report does, an
``image_url`` would need the chart on a public web server, and Slack accepts a ``slack_file`` the
publishing app can access. Working out κ and drawing charts takes a while, so the tab is published
first without charts and again once they are uploaded; an upload is reused while the channel's
report stays the same.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk.models.blocks import Block, DividerBlock, ImageBlock
from slack_sdk.models.views import View
from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.report import Report, load_report, report_blocks
from bot.agreement.report_chart import chart_title, chart_upload
from bot.db.runs import RunRecord
from bot.db.store import Store
from bot.db.usage import CostTally
from bot.limits.quota import day_start
from bot.limits.usage import CHANNEL_USAGE_DAYS, spend_words
from bot.rendering.results import status_words
from bot.slack.blocks import MAX_VIEW_BLOCKS, block_dicts, code, context_block, header_block, section_block
from bot.slack.client import SLACK_ERRORS, attempt, describe_error
from bot.slack.members import channels_of
from bot.slack.messages import BlockJson
from bot.slack.notices import slack_failure_words
from bot.vocabulary.statuses import FAILED, INTERRUPTED, STOPPED, TIMED_OUT, RunStatus
from bot.vocabulary.workspace import Workspace

__all__ = ["ChannelHome", "home_view", "load_home", "publish_home"]

logger = logging.getLogger(__name__)

MAX_HOME_CHANNELS = 10
"""Most channels shown, most recently active first: each costs a report and a chart to build."""

RECENT_RUNS = 5
"""Graded runs listed per channel, newest first."""

RUN_WORDS: dict[RunStatus | None, tuple[str, str]] = {
    None: ("⏳", "In progress"),
    INTERRUPTED: ("🔌", "Interrupted by a restart"),
    TIMED_OUT: ("⌛", "Timed out"),
    FAILED: ("⚠️", "The model failed"),
    STOPPED: ("✋", "Stopped"),
}
"""Emoji and words for the run statuses that are not grading statuses (see render.STATUS_WORDS)."""

INTRO = (
    "For each channel you share with me: its default rubric, its latest graded requests, and how "
    "far the grader agrees with the team's reviews (*Agree* / *Disagree…* on my messages). "
    "Updated each time you open this tab."
)
"""The line under the tab's title."""

NO_CHANNELS = (
    "We don't share a channel yet. Invite me to one with `/invite @rubric-bot`, then set its "
    "default rubric with `/rubric set` or start a thread by mentioning me."
)
"""Shown to someone who is in no channel the bot is in."""


@dataclass(frozen=True)
class ChannelHome:
    """What the tab shows of one channel; ``chart`` is the uploaded chart's file id, once there is one."""

    channel: str
    rubric: str | None
    runs: list[RunRecord]
    report: Report
    chart: str | None = None
    cost: CostTally | None = None
    """What the channel's runs of the last CHANNEL_USAGE_DAYS days cost."""


# --- Loading ---------------------------------------------------------------------------------


async def publish_home(client: AsyncWebClient, store: Store, *, workspace: Workspace, user: str) -> None:
    """Publish ``user``'s Home tab, then publish it again with the charts once they are uploaded.

    A failure to list the user's channels is answered on the tab itself; a chart that could not be
    uploaded is left out; a refused publish is logged.
    """
    try:
        channels = await shared_channels(client, user)
    except SLACK_ERRORS as exc:
        logger.warning("could not list the channels of %s for the Home tab: %s", user, describe_error(exc))
        await _publish(client, user, home_view([], problem=slack_failure_words(exc)))
        return
    homes = await load_home(store, workspace=workspace, channels=channels)
    if await _publish(client, user, home_view(homes)) is None:
        return
    charted = [await _with_chart(client, store, workspace, home) for home in homes]
    if charted != homes:
        await _publish(client, user, home_view(charted))


async def shared_channels(client: AsyncWebClient, user: str) -> list[str]:
    """Channels both ``user`` and the bot are members of, in the order Slack lists the user's."""
    bots = set(await channels_of(client, None))
    return [channel for channel in await channels_of(client, user) if channel in bots]


async def load_home(store: Store, *, workspace: Workspace, channels: Sequence[str]) -> list[ChannelHome]:
    """Each channel's rubric, runs and report, the most recently active channels first (at most
    MAX_HOME_CHANNELS)."""
    runs = {channel: await store.recent_graded_runs(workspace, channel, RECENT_RUNS) for channel in channels}
    cost_since = day_start(datetime.now(UTC)) - timedelta(days=CHANNEL_USAGE_DAYS - 1)
    return [
        ChannelHome(
            channel=channel,
            rubric=await store.get_channel_rubric(workspace, channel),
            runs=runs[channel],
            report=await load_report(store, workspace=workspace, channel=channel, days=None),
            cost=await store.cost_tally(workspace, channel, cost_since),
        )
        for channel in _recent_first(channels, runs)[:MAX_HOME_CHANNELS]
    ]


def _recent_first(ordered: Sequence[str], runs: dict[str, list[RunRecord]]) -> list[str]:
    """Channels with runs first, newest run first; the rest after them in their given order."""
    with_runs = sorted((c for c in ordered if runs[c]), key=lambda c: runs[c][0].started_at, reverse=True)
    return with_runs + [c for c in ordered if not runs[c]]


async def _with_chart(
    client: AsyncWebClient, store: Store, workspace: Workspace, home: ChannelHome
) -> ChannelHome:
    """The channel's home with its chart uploaded (or reused while the report is unchanged, in any
    process); unchanged without reviews or on failure. Each upload is recorded (`bot.db.uploads`)
    so that the chart is deleted from Slack with the data it shows."""
    if home.report.reviews == 0:
        return home
    digest = hashlib.sha256(repr(home.report).encode()).hexdigest()
    file_id = await store.home_chart(workspace, home.channel, digest)
    if file_id is None:
        chart = await asyncio.to_thread(chart_upload, home.report)
        uploaded = await attempt(
            client.files_upload_v2(**chart),
            f"upload the Home tab chart of {home.channel}",
        )
        if uploaded is None:
            return home
        file_id = str(uploaded["file"]["id"])
        await store.record_upload(workspace, home.channel, file_id, "home", digest)
    return replace(home, chart=file_id)


async def _publish(client: AsyncWebClient, user: str, view: dict[str, Any]) -> object | None:
    """Publish ``view`` as ``user``'s Home tab; None (logged) if Slack refused it."""
    return await attempt(client.views_publish(user_id=user, view=view), f"publish the Home tab of {user}")


# --- Rendering -------------------------------------------------------------------------------


def home_view(channels: Sequence[ChannelHome], *, problem: str | None = None) -> dict[str, Any]:
    """The Home tab: a section per channel, as many as Slack's 100 blocks hold.

    ``problem`` is Slack's error code when the viewer's channels could not be listed.
    """
    blocks: list[BlockJson] = block_dicts([header_block("Grading in your channels"), context_block(INTRO)])
    if problem is not None:
        blocks += block_dicts([section_block(_listing_failed(problem))])
    elif not channels:
        blocks += block_dicts([section_block(NO_CHANNELS)])
    for shown, home in enumerate(channels):
        section = _channel_blocks(home)
        if len(blocks) + len(section) > MAX_VIEW_BLOCKS - 1:  # keep a block to say what is left out
            blocks += block_dicts([context_block(f"…and {len(channels) - shown} more channels.")])
            break
        blocks += section
    return View(type="home", blocks=blocks).to_dict()


def _listing_failed(error: str) -> str:
    return (
        f"I couldn't list your channels (Slack said `{error}`). If that says a scope is missing, "
        "the app needs reinstalling from its manifest, which asks for `channels:read` and `groups:read`."
    )


def _channel_blocks(home: ChannelHome) -> list[BlockJson]:
    """Divider, channel, default rubric, latest runs, the channel's report and its chart."""
    rubric = (
        f"*Default rubric*\n{code(home.rubric)}"
        if home.rubric is not None
        else "*Default rubric:* none. `/rubric set <rubric>` in the channel sets one."
    )
    head: list[Block] = [
        DividerBlock(),
        section_block(f"*<#{home.channel}>*"),
        section_block(rubric),
        section_block(_runs_text(home.runs)),
    ]
    if home.cost is not None and home.cost.runs:
        head.append(section_block(f"*Cost, last {CHANNEL_USAGE_DAYS} days:* {spend_words(home.cost)}"))
    chart: list[Block] = []
    if home.chart is not None:
        period = home.report.period
        chart.append(
            ImageBlock(
                slack_file={"id": home.chart},
                alt_text=f"Chart of how far the grader agrees with the team's reviews, {period}",
                title=chart_title(home.report),
            )
        )
    report = report_blocks(home.report, channel=home.channel)["blocks"]
    return block_dicts(head) + report + block_dicts(chart)


def _runs_text(runs: Sequence[RunRecord]) -> str:
    if not runs:
        return "*Latest graded requests:* none yet."
    lines = ["*Latest graded requests*"]
    for run in runs:
        emoji, words = RUN_WORDS.get(run.status) or status_words(run.status or "")
        line = f"{emoji} {words} · {_when(run.started_at)}"
        if run.undelivered:
            line += " · _the answer never reached the thread_"
        lines.append(line)
    return "\n".join(lines)


def _when(moment: datetime) -> str:
    """A time Slack shows in the viewer's own time zone, with a UTC fallback."""
    fallback = moment.strftime("%Y-%m-%d %H:%M UTC")
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} at {{time}}|{fallback}>"
