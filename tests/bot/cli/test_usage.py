"""`rubric-bot usage`: requests, tokens and money per channel, person and day, from a seeded database."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from genai_prices import Usage, calc_price

from bot.cli.main import main
from bot.db.store import Store
from bot.limits.prices import run_cost
from bot.limits.usage import usage_table
from bot.vocabulary.thread import ThreadKey


async def seed(database: str) -> None:
    store = await Store.open(database)
    try:
        for n, (channel, user, tokens, model) in enumerate(
            [
                ("C1", "U1", 100, "openai:gpt-4o-mini"),
                ("C1", "U1", 50, "openai:gpt-4o-mini"),
                ("C1", "U2", 7, "openai:house-model"),
                ("C2", "U1", 1000, "anthropic:claude-sonnet-4-5"),
            ]
        ):
            run = await store.start_run(ThreadKey("T1", channel, f"{n}.0"), f"{n}.0", requester=user)
            spent = {"input_tokens": tokens, "output_tokens": 0, "total_tokens": tokens}
            await store.finish_run(run, "answered", tokens, cost=run_cost({"worker": (model, spent)}))
    finally:
        await store.close()


async def test_usage_per_channel_person_and_day_as_text_and_json(database_url, capsys):
    await seed(database_url)

    assert await _main(["usage", "--db", database_url, "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    mini = float(calc_price(Usage(input_tokens=150), "gpt-4o-mini", provider_id="openai").total_price)
    sonnet = float(
        calc_price(Usage(input_tokens=1000), "claude-sonnet-4-5", provider_id="anthropic").total_price
    )
    assert document["total"] == {
        "requests": 4,
        "tokens": 1157,
        "usd": pytest.approx(mini + sonnet),
        "unpriced": 1,
    }
    assert {(r["channel"], r["user"], r["requests"], r["tokens"]) for r in document["rows"]} == {
        ("C1", "U1", 2, 150),
        ("C1", "U2", 1, 7),
        ("C2", "U1", 1, 1000),
    }
    levels = {(c["level"], c["subject"]): c["tokens"] for c in document["today_by_level"]}
    assert (
        levels[("deployment", "")] == levels[("workspace", "")] == 1157 and levels[("channel", "C2")] == 1000
    )

    assert await _main(["usage", "--db", database_url, "--channel", "C1", "--days", "1"]) == 0
    text = capsys.readouterr().out
    assert "Bot usage in channel C1" in text
    assert f"Total: 3 requests, 157 tokens, ${mini:.4f} (1 unpriced: a model not in the price table)" in text
    per_person = text.split("Per person")[1].split("Per day")[0]
    assert per_person.index("U1") < per_person.index("U2")  # the most tokens first
    assert "C2" not in text
    assert "Per workspace" in text and text.split("Per workspace")[1].split("Per channel")[0].count("T1") == 1
    budgets = text.split("Today's budgets")[1]
    assert re.search(r"the whole bot\s+0\s+1,157", budgets) and re.search(
        r"channel C1 \(T1\)\s+0\s+157", budgets
    )


async def test_no_database_is_one_line_and_exit_2(tmp_path, capsys):
    assert await _main(["usage", "--db", str(tmp_path / "missing.sqlite")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("rubric-bot: no database at") and len(error.splitlines()) == 1


def test_an_empty_period_says_so():
    assert usage_table([]) == "No requests in this period."


async def _main(argv: list[str]) -> int:
    """`main` runs its own event loop, so it runs in a thread of its own here."""
    return await asyncio.to_thread(main, argv)
