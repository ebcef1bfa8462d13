"""`/rubric replay [days]` in the background: does calibration help in this channel?

The channel's reviewed iterations are replayed twice on the grader of its workspace — with the team's
other disagreements as examples (``loo``) and with none (``off``) — and the comparison is posted in
the channel with its chart, naming who asked. It costs two grader calls per reviewed iteration,
so one replay runs per channel at a time across every process (the store's replay lock), and the
next may start `RUBRIC_BOT_REPLAY_COOLDOWN` seconds after the latest started.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Final

from langgraph.checkpoint.base import BaseCheckpointSaver
from slack_sdk.web.async_client import AsyncWebClient

from bot.agent.models import configured_models
from bot.agreement.budget import ReplayBudget
from bot.agreement.comparison import Comparison, chart_png, compare, comparison_blocks
from bot.agreement.presentation import period_words
from bot.agreement.replay import (
    Calibration,
    Case,
    Regrade,
    attach_transcripts,
    load_cases,
    regrade,
    total_usage,
)
from bot.config import DEFAULT_REPLAY_COOLDOWN, DEFAULT_REPLAY_MAX_CASES, Settings
from bot.db.database import open_checkpointer
from bot.db.replays import ReplayLease, ReplayRefused
from bot.db.spend import QuotaExceeded, RunQuota
from bot.db.store import Store
from bot.limits.quota import LimitsOf
from bot.slack.client import SLACK_ERRORS, attempt, describe_error
from bot.slack.messages import NO_UNFURLS
from bot.slack.mrkdwn import slack_date
from bot.slack.notices import log_failure, reference_words, slack_failure_words
from bot.vocabulary.verdicts import Verdict
from bot.vocabulary.workspace import Workspace
from bot.workspaces.settings import Deployment, WorkspaceOverrides
from grading import EVIDENCE_TOOLS, TranscriptGrader

logger = logging.getLogger(__name__)

CONCURRENCY = 4
"""Grader calls a channel's replay makes at once; the bot's own threads share the provider."""

BASELINE: Final = "off"
"""The calibration compared against: none."""

CANDIDATE: Final = "loo"
"""The calibration measured: the team's other disagreements (leave one out)."""

CHART_FILENAME = "calibration-replay.png"
"""File name of the replay's chart when uploaded to the channel."""

Tell = Callable[..., Awaitable[None]]
"""Answers the person who asked, only for them (Slack's response_url): ``await tell(text=...)``."""


@dataclass(frozen=True)
class WorkspaceGrader:
    """The grader a workspace's runs are graded by, and its model (whose rate prices a replay)."""

    model: str
    """The langchain ``provider:model`` string."""
    grader: TranscriptGrader


GraderOf = Callable[[Workspace], Awaitable[WorkspaceGrader]]
"""The grader a workspace's runs are graded by, which its replays measure."""

ModelGrader = Callable[[str], WorkspaceGrader]
"""The grader on a model the deployment allows (``provider:model``), which a proposed grader change
is replayed on."""


@dataclass(frozen=True)
class ReplayRequest:
    """Who asked for a replay of which channel, over which period."""

    workspace: Workspace
    channel: str
    user: str
    days: int | None

    @property
    def title(self) -> str:
        return f"Does calibration help? Replay · {period_words(self.days)}"


class ChannelReplays:
    """Runs `/rubric replay` in the background, at most one per channel, and posts the result."""

    def __init__(
        self,
        *,
        store: Store,
        checkpointer: BaseCheckpointSaver,
        graders: GraderOf,
        limits: LimitsOf | None = None,
        cooldown: float = DEFAULT_REPLAY_COOLDOWN,
        max_cases: int = DEFAULT_REPLAY_MAX_CASES,
        model_graders: ModelGrader | None = None,
    ) -> None:
        """`graders` gives a workspace's grader, `model_graders` the grader on a model the deployment
        allows; `limits` a workspace's daily limits (None: no budget refuses a replay); `cooldown`:
        seconds from one replay's start in a channel to the next's; `max_cases`: the most reviewed
        cases (the latest) one replay grades."""
        self._max_cases = max_cases
        self._store = store
        self._checkpointer = checkpointer
        self._graders = graders
        self._model_graders = model_graders
        self._limits = limits
        self._cooldown = timedelta(seconds=cooldown)
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(
        self, request: ReplayRequest, tell: Tell, client: AsyncWebClient
    ) -> ReplayRefused | QuotaExceeded | None:
        """Start replaying the channel, posting with `client` (its workspace's); why not (starting
        nothing and charging nothing) while a budget it spends from (the channel's, its workspace's,
        the deployment's) is spent for the day, one runs in any process, or the cooldown since the
        latest start lasts."""
        quota = await self._quota(request.workspace)
        if quota is not None:
            spent = await self._store.replay_refusal(request.workspace, request.channel, quota)
            if spent is not None:
                return spent
        lease = await self._store.start_replay(
            request.workspace, request.channel, request.user, self._cooldown
        )
        if isinstance(lease, ReplayRefused):
            return lease
        task = asyncio.create_task(
            self._run_holding(lease, request, quota, tell, client), name=f"replay {request.channel}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return None

    async def replay_candidate(
        self,
        workspace: Workspace,
        channel: str,
        reviewed: list[Case],
        *,
        candidate: Callable[[Case], Case],
        labels: tuple[str, str],
        model: str | None = None,
    ) -> tuple[Comparison, list[Regrade]] | None:
        """The latest `max_cases` of the `reviewed` cases graded again by a candidate — each case as
        `candidate` makes it (its rubric, its calibration examples), on `model`'s grader (None: the
        workspace's), shown the examples recorded with it — compared with the verdicts the team
        reviewed, within the day's budgets (charged to `channel`); with every regrade (their gaps).
        None when no case's transcript is left. A budget that refuses a call stops the replay there,
        and the comparison says so."""
        chosen = reviewed[-self._max_cases :]
        cases, skipped = await attach_transcripts(self._checkpointer, chosen)
        if not cases:
            return None
        if model is None or self._model_graders is None:
            grader = await self._graders(workspace)
        else:
            grader = self._model_graders(model)
        budget = ReplayBudget(self._store, workspace, channel, grader.model, await self._quota(workspace))
        try:
            regrades = await self._regrade([candidate(case) for case in cases], grader, "on", budget, 1)
        finally:
            await asyncio.shield(budget.give_back())
        comparison = await asyncio.to_thread(
            compare,
            cases,
            {case.key: case.original_verdicts for case in cases},
            _verdicts(regrades),
            labels=labels,
            planned=len(cases),
            skipped=skipped,
            failed=[r for r in regrades if r.error is not None],
            usage=total_usage(regrades),
            stopped_at_budget=budget.refused is not None,
            left_out=len(reviewed) - len(chosen),
        )
        return comparison, regrades

    async def _quota(self, workspace: Workspace) -> RunQuota | None:
        """Today's caps of the workspace's budgets a replay spends from; None without limits."""
        if self._limits is None:
            return None
        return (await self._limits(workspace)).quota(datetime.now(UTC))

    async def drain(self) -> None:
        """Stop every replay (the bot is stopping); each channel is told its replay was stopped."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _run_holding(
        self,
        lease: ReplayLease,
        request: ReplayRequest,
        quota: RunQuota | None,
        tell: Tell,
        client: AsyncWebClient,
    ) -> None:
        graded = True
        try:
            graded = await self._run(request, quota, tell, client)
        finally:
            await asyncio.shield(lease.release(graded=graded))
        if not graded:  # told once the channel is free, so that asking again at once is not refused
            await attempt(
                tell(text=_nothing_to_replay(request)),
                f"tell who asked that {request.channel} has nothing to replay",
            )

    async def _run(
        self, request: ReplayRequest, quota: RunQuota | None, tell: Tell, client: AsyncWebClient
    ) -> bool:
        """Replay and post the comparison; whether there was anything to grade (a replay that found
        nothing starts no cooldown)."""
        try:
            comparison = await self._compare(request, quota)
            if comparison is None:
                return False
            await self._post(request, comparison, client)
        except asyncio.CancelledError:
            stopped = client.chat_postMessage(
                channel=request.channel,
                **NO_UNFURLS,
                text=f"The replay <@{request.user}> asked for was stopped because the bot is restarting. "
                "Run `/rubric replay` again once it is back.",
            )
            await attempt(stopped, f"tell {request.channel} its replay stopped")
            raise
        except SLACK_ERRORS as exc:
            logger.warning("could not post the replay in %s: %s", request.channel, describe_error(exc))
            await tell(
                text=f"The replay finished but I couldn't post it here ({slack_failure_words(exc)}). If "
                "I'm not in this channel, invite me with `/invite @rubric-bot` and try again."
            )
        except Exception as exc:
            reference = log_failure(logger, f"replay of {request.channel} failed", exc)
            await tell(text=f"The replay failed. {reference_words(reference)}")
        return True

    async def _compare(self, request: ReplayRequest, quota: RunQuota | None) -> Comparison | None:
        """Both passes over the latest `max_cases` reviewed cases, side by side within the day's
        budgets (`quota`): a budget that refuses the next grader call stops both."""
        reviewed = await load_cases(
            self._store, workspace=request.workspace, channel=request.channel, days=request.days
        )
        chosen = reviewed[-self._max_cases :]
        cases, skipped = await attach_transcripts(self._checkpointer, chosen)
        if not cases:
            return None
        grader = await self._graders(request.workspace)
        budget = ReplayBudget(self._store, request.workspace, request.channel, grader.model, quota)
        try:
            baseline, candidate = await asyncio.gather(
                self._regrade(cases, grader, BASELINE, budget),
                self._regrade(cases, grader, CANDIDATE, budget),
            )
        finally:
            await asyncio.shield(budget.give_back())
        if budget.refused is not None:
            logger.info("the replay of %s stopped at the budget: %s", request.channel, budget.refused)
        failed = [r for r in [*baseline, *candidate] if r.error is not None]
        return await asyncio.to_thread(
            compare,
            cases,
            _verdicts(baseline),
            _verdicts(candidate),
            labels=(f"calibration {BASELINE}", f"calibration {CANDIDATE}"),
            planned=len(cases),
            skipped=skipped,
            failed=failed,
            usage=total_usage([*baseline, *candidate]),
            stopped_at_budget=budget.refused is not None,
            left_out=len(reviewed) - len(chosen),
        )

    async def _regrade(
        self,
        cases: list[Case],
        grader: WorkspaceGrader,
        calibration: Calibration,
        budget: ReplayBudget,
        passes: int = 2,
    ) -> list[Regrade]:
        """Regrade the cases the `budget` admits (see `bot.agreement.budget`): their grader tokens,
        and their cost at the grader model's rate, count toward the day's budgets of the channel,
        its workspace and the deployment as each call is made."""
        done: list[Regrade] = []
        await regrade(
            cases,
            grader.grader,
            calibration,
            self._store,
            concurrency=CONCURRENCY // passes,  # the passes run side by side
            on_graded=done.append,
            admit=partial(budget.admit, calibration),
            settle=partial(budget.settle, calibration),
        )
        return done

    async def _post(self, request: ReplayRequest, comparison: Comparison, client: AsyncWebClient) -> None:
        message = comparison_blocks(
            comparison, title=request.title, asked_by=request.user, channel=request.channel
        )
        await client.chat_postMessage(channel=request.channel, **message, **NO_UNFURLS)
        chart = await asyncio.to_thread(chart_png, comparison)
        uploaded = await client.files_upload_v2(
            channel=request.channel,
            file=chart,
            filename=CHART_FILENAME,
            title=request.title,
            initial_comment=f"Agreement and κ with the team's reviews, calibration off vs leave-one-out "
            f"(asked by <@{request.user}>).",
        )
        # Recorded so that the chart goes with the data it shows (bot.lifecycle.uploads).
        await self._store.record_upload(
            request.workspace, request.channel, str(uploaded["file"]["id"]), "replay"
        )


def _nothing_to_replay(request: ReplayRequest) -> str:
    return (
        f"Nothing to replay in <#{request.channel}> ({period_words(request.days)}): no reviewed grader "
        "iterations whose conversation history is still there. Review the grader with *Agree* or "
        "*Disagree…* on its messages first, then replay again."
    )


def refusal_words(refused: ReplayRefused) -> str:
    """Why a replay did not start, and when the next may."""
    asker = f" (asked by <@{refused.started_by}>)" if refused.started_by else ""
    if refused.running or refused.next_start is None:
        return (
            f"A replay of this channel is already running{asker}; its result will be posted here "
            "when it is done. Only one runs per channel at a time."
        )
    return (
        f"A replay of this channel started recently{asker}, and each costs two grader calls per "
        f"reviewed answer: the next may start {slack_date(refused.next_start)}."
    )


@asynccontextmanager
async def open_replays(settings: Settings, store: Store) -> AsyncIterator[ChannelReplays]:
    """The `/rubric replay` runner of a serving process, on each workspace's grader (its own from
    `/rubric admin`, else the deployment's) and the bot's database.

    Replays read the checkpoint history on a connection of their own. Closing stops every replay
    still running, and each channel is told.
    """
    async with open_checkpointer(settings.database) as checkpointer:
        models = configured_models(settings)
        graders = {spec: TranscriptGrader(model, tools=EVIDENCE_TOOLS) for spec, model in models.items()}
        workspaces = WorkspaceOverrides(Deployment.from_settings(settings), store)

        def on_model(model: str) -> WorkspaceGrader:
            return WorkspaceGrader(model, graders[model])

        async def grader_of(workspace: Workspace) -> WorkspaceGrader:
            return on_model((await workspaces.models(workspace)).grader)

        replays = ChannelReplays(
            store=store,
            checkpointer=checkpointer,
            graders=grader_of,
            limits=workspaces.limits,
            cooldown=settings.replay_cooldown,
            max_cases=settings.replay_max_cases,
            model_graders=on_model,
        )
        try:
            yield replays
        finally:
            await replays.drain()


def _verdicts(regrades: list[Regrade]) -> dict[tuple[str, int], dict[str, Verdict]]:
    return {r.case.key: r.verdicts for r in regrades if r.error is None}
