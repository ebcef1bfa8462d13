"""The `/rubric` slash command: its table of subcommands and their handlers.

The subcommands manage the channel's default rubric and its versions, post its agreement report,
switch calibration, replay, show usage and (for workspace admins) the workspace's settings;
:data:`RUBRIC_SUBCOMMANDS` declares each once (name, usage, help, argument, handler), and parsing,
routing and the help text all read it.

Slash commands carry no thread, so they manage the channel default; a thread's own rubric is set
with a `rubric:` message in the thread. Changing how the channel is graded (`set`, `clear`,
`edit`, `revert`, `calibration on|off|drop N`, `trust`, `review`, `replay`) takes the editors' permission
(`bot.governance.editors`); a rubric change is announced in the channel. In a channel with trusted
reviews a new rubric and a calibration drop are replayed first and wait for Apply (`bot.proposals`);
`set!` skips that. Every other answer is
ephemeral (only the caller sees it), except the agreement report, which is posted to the channel.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from functools import partial
from typing import Any

from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.agreement.channel_replay import ReplayRequest, refusal_words
from bot.agreement.report import Report, load_report, report_blocks
from bot.agreement.report_chart import chart_upload
from bot.audit.report import audit_blocks, load_audit
from bot.db.proposals import ProposalKind
from bot.db.spend import QuotaExceeded
from bot.db.store import Store
from bot.governance.calibration_drops import (
    DROPS_IN_HISTORY,
    drop_example,
    drops_history,
    examples_message,
    no_such_example,
)
from bot.governance.changes import HISTORY_LENGTH, change_rubric, change_words, history_message
from bot.governance.editors import EditorsNow
from bot.governance.review_modes import MODES_IN_HISTORY, change_review_modes, modes_history, modes_message
from bot.limits.quota import refusal_message
from bot.limits.usage import load_channel_usage, usage_message
from bot.listeners.command_text import (
    Argument,
    CommandError,
    ParsedCommand,
    calibration_drop,
    calibration_switch,
    parse_command,
    report_days,
    review_mode_change,
    trust_level,
    version_number,
)
from bot.listeners.context import Services, services_of, workspace_of
from bot.proposals.replaying import SKIPPED
from bot.rendering.errors import help_text
from bot.rendering.rubrics import no_rubric_hint, rubric_error, rubric_modal
from bot.review.calibration import examples_in_force
from bot.sessions.stop import ask_to_stop_mine
from bot.shadow.report import load_shadow, shadow_blocks
from bot.slack.blocks import plural
from bot.slack.client import SLACK_ERRORS, attempt, describe_error
from bot.slack.conversation import slack_unescape
from bot.slack.messages import NO_UNFURLS, BlockJson, SlackMessage
from bot.slack.mrkdwn import FENCE, code_body
from bot.slack.notices import slack_failure_words
from bot.trust.level import LEVELS_IN_HISTORY, change_trust, level_message, levels_history
from bot.vocabulary.workspace import Workspace
from bot.workspaces.admin import open_settings
from grading import RubricError, parse_rubric

logger = logging.getLogger(__name__)

COMMAND = "/rubric"
"""The slash command's name, as declared in manifest.yml."""

CHART_COMMENT = (
    "κ per criterion against the 0.6 bar, and how often the grader matched the reviewers next to "
    "what always giving the most common verdict would score."
)
"""The message the chart is uploaded with: how to read it."""

NOTHING_TO_STOP = (
    "You have no request running in this channel, so there is nothing to stop (a request that "
    "already ended stays as it is)."
)
"""Told to someone whose `/rubric stop` finds none of their requests running."""


def register(app: AsyncApp) -> None:
    """Listen to `/rubric`."""
    app.command(COMMAND)(on_rubric)


async def on_rubric(
    ack: AsyncAck, command: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Route `/rubric …` to its subcommand; a malformed one gets the help text."""
    try:
        parsed = parse_command(command.get("text") or "", _BY_NAME)
        await _BY_NAME[parsed.name].handler(Invocation(parsed, ack, command, context, client))
    except CommandError as exc:
        await _answer(ack, f"{exc}\n\n{_help_text()}")


@dataclass(frozen=True)
class Invocation:
    """One `/rubric …` call: the parsed subcommand and what Bolt passed with it."""

    parsed: ParsedCommand
    ack: AsyncAck
    command: dict[str, Any]
    context: AsyncBoltContext
    client: AsyncWebClient

    @property
    def workspace(self) -> Workspace:
        return workspace_of(self.context)

    @property
    def channel(self) -> str:
        return self.command["channel_id"]

    @property
    def user(self) -> str:
        return self.command["user_id"]

    @property
    def services(self) -> Services:
        return services_of(self.context)

    @property
    def store(self) -> Store:
        return self.services.store

    async def client_for(self, workspace: Workspace) -> AsyncWebClient:
        """The client Bolt passed: the calling workspace's (see `bot.governance.editors.ClientFor`)."""
        return self.client

    async def refused(self) -> bool:
        """Whether the caller may not change this channel's grading; if so they were told why."""
        refusal = await self.services.editors.refusal(self.client, self.workspace, self.user)
        if refusal is not None:
            await _answer(self.ack, refusal)
        return refusal is not None


SubcommandHandler = Callable[[Invocation], Awaitable[None]]
"""A `/rubric` subcommand's handler; each must call `ack` (that is its answer). It may raise
`CommandError` for a bad argument, but only before it acks."""


async def _edit(call: Invocation) -> None:
    if await call.refused():
        return
    current = await call.store.get_channel_rubric(call.workspace, call.channel)
    await call.ack()
    view = rubric_modal(current, channel_id=call.channel)
    await attempt(
        call.client.views_open(trigger_id=call.command["trigger_id"], view=view), "open the rubric editor"
    )


async def _set(call: Invocation) -> None:
    """Set the rubric; in a channel with trusted reviews, once its replay is applied."""
    text = await _parsed_rubric(call)
    if text is not None:
        await _change(call, text)


async def _set_now(call: Invocation) -> None:
    """`/rubric set!`: set the rubric at once, skipping the replay (and saying so)."""
    text = await _parsed_rubric(call)
    if text is not None:
        await _change(call, text, replay_summary=SKIPPED)


async def _parsed_rubric(call: Invocation) -> str | None:
    """The rubric typed after the subcommand; None (the caller told what is wrong) when it does not parse."""
    text = slack_unescape(call.parsed.argument)
    try:
        parse_rubric(text)
    except RubricError as exc:
        problem = rubric_error(str(exc))
        await _answer(call.ack, problem["text"], problem["blocks"])
        return None
    return text


async def _change(
    call: Invocation, text: str | None, reverted_to: int | None = None, replay_summary: str | None = None
) -> None:
    """Change the channel's default rubric (None clears it) if the caller may; the channel is told.
    A new rubric in a channel with trusted reviews is replayed first (unless `replay_summary` says
    the replay was skipped) and waits for Apply."""
    if await call.refused():
        return
    if text is not None and replay_summary is None:
        base = await call.store.latest_rubric_version(call.workspace, call.channel)
        held = await _propose(call, "rubric", text, str(base))
        if held is not None:
            await _answer(call.ack, held)
            return
    change = await change_rubric(
        call.store,
        call.client,
        workspace=call.workspace,
        channel=call.channel,
        user=call.user,
        text=text,
        reverted_to=reverted_to,
        replay_summary=replay_summary,
    )
    await _answer(call.ack, change_words(change) if change else "This channel had no default rubric.")


async def _propose(call: Invocation, kind: ProposalKind, candidate: str, base: str | None) -> str | None:
    """Hold the change for its replay where the channel has trusted reviews; what to tell the caller
    then, None (holding nothing) otherwise."""
    proposals = call.services.proposals
    if proposals is None:
        return None

    async def tell(text: str) -> None:
        await _respond(call.context, text=text)

    return await proposals.propose(
        workspace=call.workspace,
        channel=call.channel,
        user=call.user,
        kind=kind,
        candidate=candidate,
        base=base,
        client=call.client,
        tell=tell,
    )


async def _show(call: Invocation) -> None:
    current = await call.store.get_channel_rubric(call.workspace, call.channel)
    if current is None:
        await _answer(call.ack, f"This channel has no default rubric. {no_rubric_hint()}")
        return
    # The whole rubric (up to grading's MAX_RUBRIC_CHARS), fenced so that none of it is formatting.
    await _answer(
        call.ack, f"This channel's default rubric for new conversations:\n{FENCE}{code_body(current)}{FENCE}"
    )


async def _clear(call: Invocation) -> None:
    await _change(call, None)


async def _history(call: Invocation) -> None:
    versions = await call.store.rubric_versions(call.workspace, call.channel, HISTORY_LENGTH)
    drops = await call.store.calibration_drops(call.workspace, call.channel, DROPS_IN_HISTORY)
    levels = await call.store.trust_levels(call.workspace, call.channel, LEVELS_IN_HISTORY)
    modes = await call.store.review_mode_changes(call.workspace, call.channel, MODES_IN_HISTORY)
    parts = (drops_history(drops), levels_history(levels), modes_history(modes))
    others = "\n\n".join(part for part in parts if part)
    await _answer_with(call.ack, history_message(versions, others or None))


async def _revert(call: Invocation) -> None:
    number = version_number(call.parsed.argument)
    version = await call.store.rubric_version(call.workspace, call.channel, number)
    if version is None:
        await _answer(
            call.ack, f"This channel has no version {number} of its rubric; `/rubric history` lists them."
        )
        return
    if version.rubric_text == await call.store.get_channel_rubric(call.workspace, call.channel):
        await _answer(call.ack, f"Version {number} is what this channel uses already; nothing was changed.")
        return
    if version.rubric_text is not None:
        try:
            parse_rubric(version.rubric_text)
        except RubricError as exc:  # stored before a change to the rubric format
            await _answer_with(call.ack, rubric_error(str(exc)))
            return
    await _change(call, version.rubric_text, reverted_to=number)


async def _usage(call: Invocation) -> None:
    usage = await load_channel_usage(
        call.store, workspace=call.workspace, channel=call.channel, now=datetime.now(UTC), asker=call.user
    )
    limits = await call.services.workspaces.limits(call.workspace)
    many_workspaces = call.services.installations is not None
    await _answer_with(call.ack, usage_message(usage, limits, many_workspaces=many_workspaces))


async def _report(call: Invocation) -> None:
    """Post the channel's agreement report and its chart; ack first, since κ and the chart take a while.

    With no reviews yet only the caller is told so, not the whole channel.
    """
    days = report_days(call.parsed.argument)
    await _answer(call.ack, "Working out how far the grader agrees with this channel's reviews…")
    channel = call.channel
    report = await load_report(call.store, workspace=call.workspace, channel=channel, days=days)
    graders = await _other_graders(call, channel, days)
    if report.reviews == 0:
        await _respond(call.context, **_with_graders(report_blocks(report, channel=channel), graders))
        return
    try:
        await _post_report(call, report, graders, channel)
    except SLACK_ERRORS as exc:
        logger.warning("could not post the agreement report in %s: %s", channel, describe_error(exc))
        await _respond(
            call.context,
            text=f"I couldn't post the report or its chart here ({slack_failure_words(exc)}). If I'm not in "
            "this channel, invite me with `/invite @rubric-bot` and try again.",
        )


async def _other_graders(call: Invocation, channel: str, days: int | None) -> list[BlockJson]:
    """The audit disagreement and the shadow grader's figures of the channel, as the report's blocks
    after the agreement (none of either when it graded nothing)."""
    audit = await load_audit(call.store, workspace=call.workspace, channel=channel, days=days)
    shadow = await load_shadow(call.store, workspace=call.workspace, channel=channel, days=days)
    return [*audit_blocks(audit), *shadow_blocks(shadow)]


def _with_graders(message: SlackMessage, graders: list[BlockJson]) -> SlackMessage:
    """The report's message with the other graders' blocks after it."""
    return {**message, "blocks": [*message.get("blocks", []), *graders]}


async def _post_report(call: Invocation, report: Report, graders: list[BlockJson], channel: str) -> None:
    await call.client.chat_postMessage(
        channel=channel, **_with_graders(report_blocks(report, channel=channel), graders), **NO_UNFURLS
    )
    chart = await asyncio.to_thread(chart_upload, report)
    uploaded = await call.client.files_upload_v2(channel=channel, initial_comment=CHART_COMMENT, **chart)
    # Recorded so that the chart goes with the data it shows (bot.lifecycle.uploads).
    await call.store.record_upload(call.workspace, channel, str(uploaded["file"]["id"]), "report")


async def _respond(context: AsyncBoltContext, **message: Any) -> None:
    """A later answer to the command, only for the caller (via its response_url: no membership needed)."""
    if context.respond is not None:
        await attempt(context.respond(response_type="ephemeral", **message), "answer /rubric")


async def _calibration(call: Invocation) -> None:
    """List the examples the grader is shown, switch calibration on or off, or drop an example."""
    number = calibration_drop(call.parsed.argument)
    switch = None if number is not None else calibration_switch(call.parsed.argument)
    workspace, channel = call.workspace, call.channel
    if (number is not None or switch is not None) and await call.refused():
        return
    if number is not None:
        undropped = await call.store.reviews_in_channel(workspace, channel, undropped_only=True)
        if all(row.review_id != number for row in undropped):
            await _answer(call.ack, no_such_example(number))
            return
        held = await _propose(call, "calibration_drop", str(number), None)
        if held is not None:
            await _answer(call.ack, held)
            return
        done = await drop_example(
            call.store, call.client, workspace=workspace, channel=channel, user=call.user, number=number
        )
        await _answer(call.ack, done)
        return
    if switch is not None:
        await call.store.set_calibration(workspace, channel, switch)
    enabled = switch if switch is not None else await call.store.calibration_enabled(workspace, channel)
    rubric = await call.store.get_channel_rubric(workspace, channel)
    editors = EditorsNow(call.services.editors, call.client_for)
    examples = await examples_in_force(call.store, editors, workspace, channel, rubric) if enabled else []
    await _answer_with(call.ack, examples_message(enabled, examples))


async def _trust(call: Invocation) -> None:
    """Show the channel's trust level and thresholds, or (an editor) set it or turn it off."""
    workspace, channel, risk = call.workspace, call.channel, call.services.settings.trust_risk
    if not call.parsed.argument.strip():
        levels = await call.store.trust_levels(workspace, channel, 1)
        thresholds = await call.store.trust_thresholds(workspace, channel)
        await _answer_with(call.ack, level_message(levels[0] if levels else None, thresholds, risk))
        return
    target = trust_level(call.parsed.argument)
    if await call.refused():
        return
    done = await change_trust(
        call.store,
        call.client,
        workspace=workspace,
        channel=channel,
        user=call.user,
        target=target,
        risk=risk,
    )
    await _answer(call.ack, done)


async def _review(call: Invocation) -> None:
    """Show how the channel reviews the grader, or (an editor) change it: blind, double review."""
    change = review_mode_change(call.parsed.argument)
    if change is None:
        changes = await call.store.review_mode_changes(call.workspace, call.channel, 1)
        await _answer_with(call.ack, modes_message(changes[0] if changes else None))
        return
    if await call.refused():
        return
    current = await call.store.review_modes(call.workspace, call.channel)
    done = await change_review_modes(
        call.store,
        call.client,
        workspace=call.workspace,
        channel=call.channel,
        user=call.user,
        modes=replace(
            current, **{name: value for name, value in asdict(change).items() if value is not None}
        ),
    )
    await _answer(call.ack, done)


async def _admin(call: Invocation) -> None:
    await open_settings(
        call.ack,
        call.client,
        call.services.workspaces,
        workspace=call.workspace,
        user=call.user,
        channel=call.channel,
        trigger_id=call.command["trigger_id"],
    )


async def _help(call: Invocation) -> None:
    await _answer(call.ack, _help_text())


@dataclass(frozen=True)
class RubricSubcommand:
    """One `/rubric` subcommand: how it is typed, what it does, what follows it, who handles it."""

    name: str
    usage: str
    help: str
    handler: SubcommandHandler
    argument: Argument = Argument.NONE


async def _replay(call: Invocation) -> None:
    """Replay the channel's reviewed iterations with and without calibration, in the background."""
    days = report_days(call.parsed.argument)
    if await call.refused():
        return
    request = ReplayRequest(call.workspace, call.channel, call.user, days)
    refused = await call.services.replays.start(request, partial(_respond, call.context), call.client)
    if isinstance(refused, QuotaExceeded):
        refusal = refusal_message(refused.quota, refused.limit, datetime.now(UTC), refused="replay")
        await _answer_with(call.ack, refusal)
        return
    if refused is not None:
        await _answer(call.ack, refusal_words(refused))
        return
    await _answer(
        call.ack,
        "Replaying this channel's reviewed grader answers twice — with the team's other disagreements "
        "as examples and with none — to measure whether calibration helps. The result will be posted "
        "here when it is done; it costs two grader calls per reviewed answer.",
    )


async def _stop(call: Invocation) -> None:
    """Stop the caller's requests still running in this channel (Slack's Stop button, where Slack
    has no agent sessions); each thread says when its run stopped."""
    stopped = await ask_to_stop_mine(call.store, call.workspace, call.channel, call.user)
    if not stopped:
        await _answer(call.ack, NOTHING_TO_STOP)
        return
    await _answer(
        call.ack,
        f"Stopping {plural(len(stopped), 'request')} of yours in this channel; each thread says when it "
        "has stopped, with the best draft so far.",
    )


RUBRIC_SUBCOMMANDS: tuple[RubricSubcommand, ...] = (
    RubricSubcommand(
        "set",
        "/rubric set <rubric>",
        "set this channel's default rubric for new conversations",
        _set,
        Argument.REQUIRED,
    ),
    RubricSubcommand(
        "set!",
        "/rubric set! <rubric>",
        "set it at once, without first replaying it against the team's trusted reviews",
        _set_now,
        Argument.REQUIRED,
    ),
    RubricSubcommand(
        "edit", "/rubric edit", "edit the channel's default rubric in a form (plain `/rubric` too)", _edit
    ),
    RubricSubcommand("show", "/rubric show", "show the channel's default rubric", _show),
    RubricSubcommand("clear", "/rubric clear", "remove the channel's default rubric", _clear),
    RubricSubcommand(
        "history",
        "/rubric history",
        f"the last {HISTORY_LENGTH} versions of the channel's default rubric",
        _history,
    ),
    RubricSubcommand(
        "revert",
        "/rubric revert <N>",
        "make version N the channel's default rubric again",
        _revert,
        Argument.REQUIRED,
    ),
    RubricSubcommand(
        "report",
        "/rubric report [days]",
        "how often the team agrees with the grader, per criterion",
        _report,
        Argument.OPTIONAL,
    ),
    RubricSubcommand(
        "calibration",
        "/rubric calibration [on|off|drop N]",
        "the team's examples the grader is shown; switch them on or off, or drop one",
        _calibration,
        Argument.OPTIONAL,
    ),
    RubricSubcommand(
        "trust",
        "/rubric trust [level|off]",
        "act on the grader alone only where reviews show it agrees with the team (e.g. 0.9)",
        _trust,
        Argument.OPTIONAL,
    ),
    RubricSubcommand(
        "review",
        "/rubric review [blind on|off|double <share>|off]",
        "how reviews measure: blind forms, and a second reviewer for a share of iterations (e.g. 0.2)",
        _review,
        Argument.OPTIONAL,
    ),
    RubricSubcommand(
        "replay",
        "/rubric replay [days]",
        "does calibration help? regrade reviewed answers with and without it",
        _replay,
        Argument.OPTIONAL,
    ),
    RubricSubcommand(
        "usage", "/rubric usage", "this channel's requests, tokens and cost in US$, and the limits", _usage
    ),
    RubricSubcommand(
        "admin",
        "/rubric admin",
        "workspace admins: this workspace's models, daily limits and rubric editors",
        _admin,
    ),
    RubricSubcommand("stop", "/rubric stop", "stop your requests still running in this channel", _stop),
    RubricSubcommand("help", "/rubric help", "show this help", _help),
)
"""Every `/rubric` subcommand, in the order the help lists them; a new one is one more entry."""

_BY_NAME: dict[str, RubricSubcommand] = {subcommand.name: subcommand for subcommand in RUBRIC_SUBCOMMANDS}
"""The table by subcommand name, for parsing and routing."""


def _help_text() -> str:
    return help_text([(subcommand.usage, subcommand.help) for subcommand in RUBRIC_SUBCOMMANDS])


async def _answer(ack: AsyncAck, text: str, blocks: list[BlockJson] | None = None) -> None:
    """Answer the command with a message only the caller sees."""
    await ack(text=text, blocks=blocks, response_type="ephemeral")


async def _answer_with(ack: AsyncAck, message: SlackMessage) -> None:
    """Answer the command with a rendered message only the caller sees."""
    await _answer(ack, message["text"], message.get("blocks"))
