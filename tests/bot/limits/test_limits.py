"""The daily limits' arithmetic and what a refusal and `/rubric usage` say (pure)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from bot.db.store import UsageRow
from bot.limits.quota import DailyLimits, day_start, next_reset, refusal_message
from bot.limits.usage import summarize, usage_message

NOW = datetime(2026, 12, 3, 23, 59, tzinfo=UTC)


def test_the_day_starts_and_resets_at_midnight_utc():
    assert day_start(NOW) == datetime(2026, 12, 3, tzinfo=UTC)
    assert next_reset(NOW) == datetime(2026, 12, 4, tzinfo=UTC)


def test_zero_means_no_limit_and_no_limits_need_no_quota():
    assert DailyLimits(None, None).quota(NOW) is None
    quota = DailyLimits(requests_per_user=2).quota(NOW)
    assert quota is not None and quota.since == day_start(NOW) and quota.tokens_per_channel is None


def test_a_refusal_names_the_limit_and_when_it_resets_in_the_readers_time_zone():
    person = refusal_message("requests", 100, NOW)
    channel = refusal_message("tokens", 50_000, NOW)

    assert "limit of 100 requests today" in person["text"]
    assert "budget of 50,000 model tokens" in channel["text"]
    reset = int(next_reset(NOW).timestamp())
    assert f"<!date^{reset}^" in str(person["blocks"]) and "2026-12-04 00:00 UTC" in str(person["blocks"])


def test_usage_sums_today_and_the_period_and_ranks_requesters_by_tokens():
    today = date(2026, 12, 3)
    rows = [
        UsageRow(date(2026, 12, 1), "C1", "U1", 4, 400),
        UsageRow(today, "C1", "U1", 1, 100),
        UsageRow(today, "C1", "U2", 2, 900),
    ]
    usage = summarize(rows, channel="C1", today=today, days=30)
    assert (usage.today.requests, usage.today.tokens) == (3, 1000)
    assert (usage.period.requests, usage.period.tokens) == (7, 1400)
    assert [user for user, _ in usage.top] == ["U2", "U1"]

    text = str(usage_message(usage, DailyLimits(requests_per_user=100)))
    assert "Today (UTC):* 3 requests, 1,000 tokens" in text and "<@U2>: 2 requests, 900 tokens" in text
    assert "100 requests per person" in text and "no token budget per channel" in text
