"""The cost an exported row carries, from what a run's end recorded (pure)."""

from __future__ import annotations

import pytest

from bot.db.evaluations import RecordedCost
from bot.export.dataset import exported_cost
from bot.limits.prices import run_cost

SPENT = {
    "input_tokens": 1_000,
    "output_tokens": 100,
    "total_tokens": 1_100,
    "input_token_details": {"cache_read": 600},
}
"""A role's reported usage: 1,000 input tokens (600 of them cached) and 100 output."""


def recorded(worker: str, grader: str) -> RecordedCost:
    """What a run's end records of its cost (as `bot.db.usage.cost_values` stores it)."""
    cost = run_cost({"worker": (worker, SPENT), "grader": (grader, SPENT)})
    roles = cost.model_dump(mode="json")["roles"]
    return RecordedCost(usd=cost.usd, unpriced=bool(cost.unpriced), token_usage=roles)


def test_a_priced_run_carries_its_money_and_its_tokens_per_role():
    cost = exported_cost(recorded("openai:gpt-4o-mini", "openai:gpt-4o"))

    assert cost is not None and cost["unpriced"] == []
    # Per million: gpt-4o-mini $0.15 input, $0.075 cached, $0.60 output; gpt-4o $2.50, $1.25, $10.
    mini = 400 * 0.15 + 600 * 0.075 + 100 * 0.60
    four = 400 * 2.50 + 600 * 1.25 + 100 * 10.0
    assert cost["usd"] == pytest.approx((mini + four) / 1e6)
    assert cost["tokens"]["grader"] == {
        "model": "openai:gpt-4o",
        "input_tokens": 1_000,
        "cached_input_tokens": 600,
        "cache_write_tokens": 0,
        "output_tokens": 100,
    }
    assert set(cost["tokens"]) == {"worker", "grader"}


def test_a_run_with_a_model_the_price_table_does_not_know_carries_no_made_up_total():
    cost = exported_cost(recorded("openai:gpt-4o-mini", "ollama:house-grader"))

    assert cost is not None
    assert cost["usd"] is None and cost["unpriced"] == ["ollama:house-grader"]
    assert cost["tokens"]["grader"]["model"] == "ollama:house-grader"
    assert cost["tokens"]["grader"]["output_tokens"] == 100  # its tokens are kept to price later


def test_a_run_whose_cost_was_not_recorded_carries_none():
    assert exported_cost(None) is None
