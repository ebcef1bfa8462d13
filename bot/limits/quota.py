"""The daily limits: requests per person (`RUBRIC_BOT_DAILY_REQUESTS_PER_USER`) and tokens per channel
(`RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL`), per UTC day.

The store counts and admits a run in one locked transaction (`bot.db.store.Store.start_run`), so
requests arriving together cannot both take the last place. A refused request gets one reply in
its thread saying which limit it met and when the day resets; no model is called for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta

from bot.config import Settings
from bot.db.store import QuotaName, RunQuota
from bot.slack.blocks import block_dicts, context_block, section_block
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import slack_date

NO_LIMIT = 0
"""The value of either setting that switches its limit off."""


@dataclass(frozen=True)
class DailyLimits:
    """The limits in force; None: no limit of that kind."""

    requests_per_user: int | None = None
    tokens_per_channel: int | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> DailyLimits:
        return cls.of(settings.daily_requests_per_user, settings.daily_tokens_per_channel)

    @classmethod
    def of(cls, requests_per_user: int, tokens_per_channel: int) -> DailyLimits:
        """The limits of two settings' values, where `NO_LIMIT` switches one off."""
        return cls(requests_per_user=_limit(requests_per_user), tokens_per_channel=_limit(tokens_per_channel))

    def quota(self, now: datetime) -> RunQuota | None:
        """What a run started at `now` must stay within; None when nothing is limited."""
        if self.requests_per_user is None and self.tokens_per_channel is None:
            return None
        return RunQuota(
            since=day_start(now),
            requests_per_requester=self.requests_per_user,
            tokens_per_channel=self.tokens_per_channel,
        )


def _limit(value: int) -> int | None:
    return None if value == NO_LIMIT else value


def day_start(now: datetime) -> datetime:
    """Midnight UTC at the start of `now`'s UTC day: where the day's counts begin."""
    return datetime.combine(now.astimezone(UTC).date(), time(), tzinfo=UTC)


def next_reset(now: datetime) -> datetime:
    """The next midnight UTC after `now`, when the day's counts start again."""
    return day_start(now) + timedelta(days=1)


def refusal_message(quota: QuotaName, limit: int, now: datetime) -> SlackMessage:
    """The thread reply to a request refused at `now` by a daily limit: which, and when it resets."""
    if quota == "requests":
        summary = f"You have reached your limit of {limit:,} requests today"
        why = "Each person may ask the bot for that many answers per day (UTC) in this workspace."
    else:
        summary = f"This channel has used its budget of {limit:,} model tokens for today"
        why = "Each channel's requests may use that many tokens per day (UTC), worker and grader together."
    resets = f"The limit resets at midnight UTC, {slack_date(next_reset(now))}; send the request again then."
    return {
        "text": f"{summary}, so I did not run this request.",
        "blocks": block_dicts(
            [
                section_block(f"🛑 *{summary}*, so I did not run this request. {resets}"),
                context_block(f"{why} `/rubric usage` shows this channel's use."),
            ]
        ),
    }
