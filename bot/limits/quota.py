"""The daily limits: requests per person (`RUBRIC_BOT_DAILY_REQUESTS_PER_USER`) and tokens per channel
(`RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL`), per workspace (`RUBRIC_BOT_WORKSPACE_DAILY_TOKENS`) and for
the whole deployment (`RUBRIC_BOT_DAILY_TOKENS`), per UTC day; and the same three levels' budgets in
money (`RUBRIC_BOT_CHANNEL_DAILY_USD`, `RUBRIC_BOT_WORKSPACE_DAILY_USD`, `RUBRIC_BOT_DAILY_USD`):
whichever of a level's budgets is reached first refuses.

The store admits a run against every level in one statement (`bot.db.spend.admit`), reserving
`RUBRIC_BOT_RUN_TOKEN_ESTIMATE` tokens, and what they would cost at the dearer of the run's worker
and grader models, until the run ends, so requests arriving together cannot all squeeze under a
budget. A refused request gets one reply in its thread saying which limit it met and when the day
resets; no model is called for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Literal, TypeVar

from bot.config import DEFAULT_RUN_TOKEN_ESTIMATE, Settings
from bot.db.spend import Cap, QuotaName, RunQuota
from bot.limits.prices import dollars, estimated_usd
from bot.slack.blocks import block_dicts, context_block, section_block
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import slack_date
from bot.vocabulary.workspace import Workspace

NO_LIMIT = 0
"""The value of any limit setting that switches its limit off."""

DEFAULT_WORKSPACE_SHARE = 0.25
"""A workspace's daily budget, as a share of the deployment's, where the deployment has a budget and
the workspace's is not set: otherwise the first workspace to install the app could spend all of it.
Set `RUBRIC_BOT_WORKSPACE_DAILY_USD` / `_TOKENS` (``0``: none) to choose otherwise."""

WorkspaceBudget = Literal["daily_usd_per_workspace", "daily_tokens_per_workspace"]


def workspace_budget(settings: Settings, name: WorkspaceBudget, per_deployment: float) -> float:
    """A workspace's budget `name`: as set (``0``: none), else `DEFAULT_WORKSPACE_SHARE` of
    `per_deployment` when the deployment has a budget of that kind."""
    if name in settings.model_fields_set or per_deployment == NO_LIMIT:
        return float(getattr(settings, name))
    return per_deployment * DEFAULT_WORKSPACE_SHARE


def workspace_tokens(settings: Settings) -> int:
    """Each workspace's daily token budget (see `workspace_budget`); at least one token."""
    tokens = workspace_budget(settings, "daily_tokens_per_workspace", settings.daily_tokens)
    return max(int(tokens), 1) if tokens else NO_LIMIT


@dataclass(frozen=True)
class MoneyLimits:
    """The daily money budgets in US dollars (`RUBRIC_BOT_CHANNEL_DAILY_USD`,
    `RUBRIC_BOT_WORKSPACE_DAILY_USD`, `RUBRIC_BOT_DAILY_USD`); None: no budget of that kind. A run
    reserves its estimated cost at admission, replaced by its cost, priced from its tokens
    (`bot.limits.prices`), when it ends."""

    per_channel: float | None = None
    per_workspace: float | None = None
    per_deployment: float | None = None

    @classmethod
    def of(cls, per_channel: float, per_workspace: float, per_deployment: float) -> MoneyLimits:
        """The budgets of the settings' values, where `NO_LIMIT` switches one off."""
        return cls(_limit(per_channel), _limit(per_workspace), _limit(per_deployment))

    @classmethod
    def from_settings(cls, settings: Settings) -> MoneyLimits:
        per_workspace = workspace_budget(settings, "daily_usd_per_workspace", settings.daily_usd)
        return cls.of(settings.daily_usd_per_channel, per_workspace, settings.daily_usd)


@dataclass(frozen=True)
class DailyLimits:
    """The limits in force; None: no limit of that kind."""

    requests_per_user: int | None = None
    tokens_per_channel: int | None = None
    tokens_per_workspace: int | None = None
    tokens_per_deployment: int | None = None
    run_estimate: int = DEFAULT_RUN_TOKEN_ESTIMATE
    """Tokens each run reserves from the token budgets until it ends."""
    run_estimate_usd: float = 0.0
    """US dollars each run reserves from the money budgets until it ends (see `estimated_usd`)."""
    money: MoneyLimits = field(default_factory=MoneyLimits)
    """The budgets in money; whichever of a level's budgets is reached first refuses."""

    @classmethod
    def from_settings(cls, settings: Settings) -> DailyLimits:
        return cls.of(
            settings.daily_requests_per_user,
            settings.daily_tokens_per_channel,
            workspace_tokens(settings),
            settings.daily_tokens,
            run_estimate=settings.run_token_estimate,
            money=MoneyLimits.from_settings(settings),
            models=(settings.worker_model or "", settings.grader_model or ""),
        )

    @classmethod
    def of(
        cls,
        requests_per_user: int,
        tokens_per_channel: int,
        tokens_per_workspace: int = NO_LIMIT,
        tokens_per_deployment: int = NO_LIMIT,
        *,
        run_estimate: int = DEFAULT_RUN_TOKEN_ESTIMATE,
        money: MoneyLimits = MoneyLimits(),
        models: Iterable[str] = (),
    ) -> DailyLimits:
        """The limits of the settings' values, where `NO_LIMIT` switches one off; a run reserves
        `run_estimate` tokens priced at the dearest of its `models`."""
        return cls(
            requests_per_user=_limit(requests_per_user),
            tokens_per_channel=_limit(tokens_per_channel),
            tokens_per_workspace=_limit(tokens_per_workspace),
            tokens_per_deployment=_limit(tokens_per_deployment),
            run_estimate=run_estimate,
            run_estimate_usd=estimated_usd(run_estimate, models),
            money=money,
        )

    def quota(self, now: datetime) -> RunQuota:
        """What a run started at `now` reserves and must stay within (its spend is counted at every
        level even where nothing is limited, so that usage shows each level's day)."""
        return RunQuota(
            day=day_start(now).date(),
            estimate=self.run_estimate,
            estimate_usd=self.run_estimate_usd,
            caps={
                "person": Cap(requests=self.requests_per_user),
                "channel": Cap(tokens=self.tokens_per_channel, usd=self.money.per_channel),
                "workspace": Cap(tokens=self.tokens_per_workspace, usd=self.money.per_workspace),
                "deployment": Cap(tokens=self.tokens_per_deployment, usd=self.money.per_deployment),
            },
        )


LimitsOf = Callable[[Workspace], Awaitable[DailyLimits]]
"""The daily limits in force in a workspace, whose budgets its replays and audits spend from."""

Amount = TypeVar("Amount", int, float)
"""A limit's value: a count (requests, tokens) or money."""


def _limit(value: Amount) -> Amount | None:
    return None if value == NO_LIMIT else value


def day_start(now: datetime) -> datetime:
    """Midnight UTC at the start of `now`'s UTC day: where the day's counts begin."""
    return datetime.combine(now.astimezone(UTC).date(), time(), tzinfo=UTC)


def next_reset(now: datetime) -> datetime:
    """The next midnight UTC after `now`, when the day's counts start again."""
    return day_start(now) + timedelta(days=1)


_REFUSALS: dict[QuotaName, tuple[str, str]] = {
    "channel_usd": (
        "This channel has used its budget of {limit} for today",
        "Each channel's requests may cost that much per day (UTC) at list prices, worker and grader "
        "together.",
    ),
    "workspace_usd": (
        "This workspace has used its budget of {limit} for today",
        "All the workspace's requests together may cost that much per day (UTC) at list prices.",
    ),
    "deployment_usd": (
        "The bot has used its budget of {limit} for today",
        "Every workspace's requests together may cost that much per day (UTC) at list prices.",
    ),
    "requests": (
        "You have reached your limit of {limit:,} requests today",
        "Each person may ask the bot for that many answers per day (UTC) in this workspace.",
    ),
    "tokens": (
        "This channel has used its budget of {limit:,} model tokens for today",
        "Each channel's requests and replays may use that many tokens per day (UTC), worker and grader "
        "together.",
    ),
    "workspace_tokens": (
        "This workspace has used its budget of {limit:,} model tokens for today",
        "All the workspace's requests and replays together may use that many tokens per day (UTC).",
    ),
    "deployment_tokens": (
        "The bot has used its budget of {limit:,} model tokens for today",
        "Every workspace's requests and replays together may use that many tokens per day (UTC).",
    ),
}
"""Each limit's refusal: what was reached (with ``{limit}``), and what the limit is."""


Refused = Literal["request", "replay"]
"""What a daily limit refused: a request (told in its thread) or a `/rubric replay` (told to who asked)."""

_NOT_DONE: dict[Refused, tuple[str, str]] = {
    "request": ("so I did not run this request", "send the request again then"),
    "replay": ("so I did not start the replay", "run `/rubric replay` again then"),
}
"""For each refused thing: what was not done, and what to do once the limit resets."""


def refusal_message(
    quota: QuotaName, limit: float, now: datetime, refused: Refused = "request"
) -> SlackMessage:
    """The answer to a request (or replay) refused at `now` by a daily limit: which limit, and when
    it resets."""
    summary, why = _REFUSALS[quota]
    summary = summary.format(limit=dollars(limit) if quota.endswith("_usd") else limit)
    not_done, again = _NOT_DONE[refused]
    resets = f"The limit resets at midnight UTC, {slack_date(next_reset(now))}; {again}."
    return {
        "text": f"{summary}, {not_done}.",
        "blocks": block_dicts(
            [
                section_block(f"🛑 *{summary}*, {not_done}. {resets}"),
                context_block(f"{why} `/rubric usage` shows this channel's use."),
            ]
        ),
    }
