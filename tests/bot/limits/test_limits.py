"""The daily limits' arithmetic and what a refusal and `/rubric usage` say (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime

import pytest

from bot.db.spend import Cap, LevelSpend
from bot.db.usage import UsageRow
from bot.limits.quota import DailyLimits, MoneyLimits, day_start, next_reset, refusal_message
from bot.limits.usage import summarize, usage_message

NOW = datetime(2026, 12, 3, 23, 59, tzinfo=UTC)


def test_the_day_starts_and_resets_at_midnight_utc():
    assert day_start(NOW) == datetime(2026, 12, 3, tzinfo=UTC)
    assert next_reset(NOW) == datetime(2026, 12, 4, tzinfo=UTC)


def test_zero_means_no_limit_and_every_level_is_counted_with_a_reservation():
    assert DailyLimits.of(0, 0, 0, 0) == DailyLimits(None, None, None, None)
    quota = DailyLimits.of(2, 0, 900, 0, run_estimate=300).quota(NOW)
    assert quota.day == day_start(NOW).date() and quota.estimate == 300
    assert quota.cap("person") == Cap(requests=2) and quota.cap("workspace") == Cap(tokens=900)
    assert quota.cap("channel") == quota.cap("deployment") == Cap()


def test_a_run_reserves_its_estimated_tokens_priced_at_the_dearer_model_and_an_unknown_one_at_nothing():
    def reserved(*models: str) -> float:
        return DailyLimits.of(0, 0, run_estimate=20_000, models=models).quota(NOW).estimate_usd

    cheap, dear = reserved("openai:gpt-4o-mini"), reserved("openai:gpt-4o")
    # 16,000 input and 4,000 output tokens at each model's list price per million.
    assert cheap == pytest.approx((16_000 * 0.15 + 4_000 * 0.60) / 1e6)
    assert dear == pytest.approx((16_000 * 2.50 + 4_000 * 10.0) / 1e6)
    assert (
        reserved("openai:gpt-4o-mini", "openai:gpt-4o")
        == reserved("openai:gpt-4o", "openai:gpt-4o-mini")
        == dear
    )
    assert reserved("ollama:llama3", "openai:gpt-4o-mini") == cheap
    assert reserved("ollama:llama3") == 0.0


def test_a_refusal_names_the_limit_and_when_it_resets_in_the_readers_time_zone():
    person = refusal_message("requests", 100, NOW)
    channel = refusal_message("tokens", 50_000, NOW)
    workspace = refusal_message("workspace_tokens", 70_000, NOW)
    deployment = refusal_message("deployment_tokens", 90_000, NOW)

    assert "limit of 100 requests today" in person["text"]
    assert "budget of 50,000 model tokens" in channel["text"]
    assert "This workspace has used its budget of 70,000" in workspace["text"]
    assert "The bot has used its budget of 90,000" in deployment["text"]
    reset = int(next_reset(NOW).timestamp())
    assert f"<!date^{reset}^" in str(person["blocks"]) and "2026-12-04 00:00 UTC" in str(person["blocks"])
    assert "did not run this request" in channel["text"] and "send the request again" in str(
        channel["blocks"]
    )


def test_a_refused_replay_is_told_in_the_same_words_what_was_not_started():
    replay = refusal_message("channel_usd", 2.5, NOW, refused="replay")

    assert (
        replay["text"]
        == "This channel has used its budget of $2.50 for today, so I did not start the replay."
    )
    assert "run `/rubric replay` again then" in str(replay["blocks"]) and "2026-12-04 00:00 UTC" in str(
        replay["blocks"]
    )


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


def test_usage_shows_every_budget_level_spent_against_its_limit():
    spent = {
        "person": LevelSpend("person", 3, 1_200),
        "channel": LevelSpend("channel", 5, 21_000),
        "workspace": LevelSpend("workspace", 9, 48_000),
    }
    usage = replace(summarize([], channel="C1", today=date(2026, 12, 3), days=30), budgets=spent)
    limits = DailyLimits.of(10, 50_000, 60_000, 0)

    text = str(usage_message(usage, limits))

    assert "You: 3 of 10 requests" in text and "This channel: 21,000 of 50,000 tokens" in text
    assert "This workspace: 48,000 of 60,000 tokens" in text and "The whole bot: 0 tokens (no budget)" in text
    assert "60,000 tokens per workspace" in text and "no token budget per day for the whole bot" in text


def test_a_member_of_one_of_many_workspaces_sees_their_workspaces_figures_not_the_deployments():
    spent = {
        "workspace": LevelSpend("workspace", 9, 48_000),
        "deployment": LevelSpend("deployment", 400, 2_345_678, usd=41.5),
    }
    usage = replace(summarize([], channel="C1", today=date(2026, 12, 3), days=30), budgets=spent)
    limits = DailyLimits.of(10, 50_000, 60_000, 5_000_000, money=MoneyLimits.of(0, 12.5, 50))

    shared = str(usage_message(usage, limits, many_workspaces=True))
    own = str(usage_message(usage, limits))

    assert "This workspace: 48,000 of 60,000 tokens" in shared and "$12.50 per workspace" in shared
    for deployments in ("whole bot", "2,345,678", "5,000,000", "$41.50", "$50.00"):
        assert deployments not in shared
        assert deployments in own
