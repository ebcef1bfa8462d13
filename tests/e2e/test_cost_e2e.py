"""What a run costs in money, end to end: the final message and `/rubric usage` show the cost of the
tokens the run recorded at the bundled price table's list prices, cached input priced as cached; a
model the table does not know is "unpriced", never free."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from typing import Any

import pytest
from genai_prices import Usage, calc_price

from bot.cli.main import main
from bot.limits.prices import dollars
from tests.e2e.conftest import CRITERIA, RUN_TIMEOUT, BotProcess, Service, metrics, value
from tests.standins import slack_requests as sr
from tests.standins import wait_for
from tests.standins.model_api import ModelApiStandin, scripted_revision
from tests.standins.slack_api import SlackApiStandin


@pytest.fixture
def launch(
    start_bot: Callable[..., BotProcess], slack_api: SlackApiStandin, model_api: ModelApiStandin
) -> Callable[..., Service]:
    def start(**env: str) -> Service:
        model_api.worker, model_api.grader = scripted_revision(CRITERIA)
        # Prompts here are short: the stand-in caches any shared prefix, as a provider does a long one.
        model_api.cache_min_tokens, model_api.cache_step_tokens = 0, 1
        return Service(slack_api, model_api, start_bot(env=env))

    return start


def usage_answer(s: Service, channel: str) -> str:
    answer = s.send(sr.slash_command("usage", channel, response_url=s.slack.response_url(channel))).json()
    return answer["text"] + json.dumps(answer.get("blocks"))


def stored_run(s: Service, channel: str) -> tuple[float, bool, dict[str, Any]]:
    """The run's recorded cost, whether it is partly unpriced, and the tokens it was priced from,
    once the run's end is recorded (just after its final message is posted)."""

    def recorded() -> tuple[Any, ...] | None:
        with closing(sqlite3.connect(s.db_path)) as db:
            return db.execute(
                "SELECT cost_usd, cost_unpriced, token_usage FROM runs "
                "WHERE channel = ? AND token_usage IS NOT NULL",
                (channel,),
            ).fetchone()

    usd, unpriced, usage = wait_for(recorded, RUN_TIMEOUT, message=f"the cost of the run in {channel}")
    return usd, bool(unpriced), json.loads(usage)


def list_price(role: dict[str, Any]) -> float:
    """A role's tokens at genai-prices' list price for its model."""
    provider, _, model = role["model"].partition(":")
    tokens = Usage(
        input_tokens=role["input_tokens"],
        cache_read_tokens=role["cached_input_tokens"],
        cache_write_tokens=role["cache_write_tokens"],
        output_tokens=role["output_tokens"],
    )
    return float(calc_price(tokens, model, provider_id=provider).total_price)


def test_the_final_message_and_usage_show_the_runs_cost_at_list_prices_with_cached_input(launch):
    s = launch()
    s.set_channel_rubric("C1")
    root = s.mention("What is the capital of France?", "C1")
    (final,) = s.wait_finals("C1", root, 1)

    usd, unpriced, roles = stored_run(s, "C1")
    worker, grader = s.model.requests("worker"), s.model.requests("grader")
    assert roles["worker"]["input_tokens"] == sum(r.prompt_tokens for r in worker)
    assert roles["grader"]["input_tokens"] == sum(r.prompt_tokens for r in grader)
    # The second iteration's grader request shares its fixed part with the first's: cached.
    assert roles["grader"]["cached_input_tokens"] == sum(r.cached_tokens for r in grader) > 0
    expected = list_price(roles["worker"]) + list_price(roles["grader"])
    assert usd == pytest.approx(expected) and not unpriced
    assert f"2 iterations · {dollars(expected)}" in final.all_text
    assert f"{dollars(expected)}" in usage_answer(s, "C1")


def test_a_model_the_price_table_does_not_know_is_shown_as_unpriced_not_free(launch):
    s = launch(RUBRIC_BOT_MODEL="openai:house-model-7")
    s.set_channel_rubric("C1")
    root = s.mention("What is the capital of France?", "C1")
    (final,) = s.wait_finals("C1", root, 1)

    assert "unpriced (openai:house-model-7: not in the price table)" in final.all_text
    assert "$" not in final.all_text.split("Tokens this run:")[1]  # no made-up price
    assert stored_run(s, "C1")[1]
    assert "1 unpriced: a model not in the price table" in usage_answer(s, "C1")


def test_a_channel_over_its_money_budget_refuses_the_next_request_and_another_channel_does_not(
    start_bot, slack_api, model_api, database_url
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    s = Service(
        slack_api,
        model_api,
        start_bot(env={"RUBRIC_BOT_DB": database_url, "RUBRIC_BOT_CHANNEL_DAILY_USD": "0.0001"}),
    )
    s.set_channel_rubric("C1")
    s.set_channel_rubric("C2")
    root = s.mention("Spend the money", "C1")
    (final,) = s.wait_finals("C1", root, 1)
    spent = re.search(r"\$(\d+\.\d+)", final.all_text.split("Tokens this run:")[1])
    assert spent is not None and float(spent.group(1)) > 0.0001  # this run alone passes the budget

    s.say("One more here", "C1", thread_ts=root, user="U2")
    refusal = s.wait_text("C1", root, "budget of $0.0001")
    other = s.mention("Another channel's question", "C2")
    s.wait_finals("C2", other, 1)

    assert "This channel has used its budget of $0.0001 for today" in refusal.all_text
    assert "midnight UTC" in refusal.all_text
    assert s.worker_requests_for("One more here") == []
    assert "$0.0001 per channel" in usage_answer(s, "C1")


AUDIT_MODEL = "gpt-4o"
"""The audit grader's model (`RUBRIC_BOT_AUDIT_MODEL`), dearer than the loop's: its price shows."""


def audited(start_bot, slack_api, model_api, database_url, **env: str) -> Service:
    """A bot on the test's database whose every finished run the audit grader grades again."""
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    audit = {"RUBRIC_BOT_AUDIT_MODEL": f"openai:{AUDIT_MODEL}", "RUBRIC_BOT_AUDIT_SHARE": "1"}
    return Service(slack_api, model_api, start_bot(env={"RUBRIC_BOT_DB": database_url, **audit, **env}))


def test_the_audit_graders_cost_is_priced_at_its_models_rate_in_usage_report_export_and_metrics(
    start_bot, slack_api, model_api, database_url, capsys
):
    s = audited(start_bot, slack_api, model_api, database_url)
    s.set_channel_rubric("C1")
    root = s.mention("What is the capital of France?", "C1")
    s.wait_finals("C1", root, 1)
    wait_for(
        lambda: value(
            metrics(s.bot), "rubric_bot_audit_total", agreement="agree", loop="passed", iterations="2"
        ),
        RUN_TIMEOUT,
        message="the run's audit",
    )

    assert main(["export", "--db", database_url, "--channel", "C1"]) == 0
    cost = json.loads(capsys.readouterr().out.splitlines()[0])["cost"]
    (audit,) = [r for r in s.model.requests("grader") if r.model == AUDIT_MODEL]
    roles = cost["tokens"]
    assert roles["audit"]["model"] == f"openai:{AUDIT_MODEL}"
    assert roles["audit"]["input_tokens"] == audit.prompt_tokens
    audit_usd = list_price(roles["audit"])
    total = sum(list_price(role) for role in roles.values())
    assert audit_usd > 0 and cost["usd"] == pytest.approx(total) and cost["unpriced"] == []
    # `/rubric usage`, the report's cost line and the cost counter all count it, as the audit's.
    assert dollars(total) in usage_answer(s, "C1")
    assert main(["usage", "--db", database_url, "--channel", "C1", "--json"]) == 0
    used = json.loads(capsys.readouterr().out)
    assert used["total"]["usd"] == pytest.approx(total)
    assert used["today_by_level"] and all(
        level["usd"] == pytest.approx(total) for level in used["today_by_level"]
    )  # the day's budgets: the run's reservation and the audit's both settled at what they used
    assert main(["report", "--db", database_url, "--channel", "C1"]) == 0
    printed = capsys.readouterr().out
    assert f"Cost: {dollars(total)} over 1 run" in printed
    assert f"audit grader {dollars(audit_usd)} of it over 1 audited run" in printed
    spent = metrics(s.bot)
    assert value(spent, "rubric_bot_cost_usd_total", role="audit") == pytest.approx(audit_usd)
    assert (
        value(spent, "rubric_bot_tokens_total", role="audit")
        == roles["audit"]["input_tokens"] + roles["audit"]["output_tokens"]
    )


def test_a_spent_money_budget_skips_the_audit_not_the_run(start_bot, slack_api, model_api, database_url):
    s = audited(start_bot, slack_api, model_api, database_url, RUBRIC_BOT_CHANNEL_DAILY_USD="0.0001")
    s.set_channel_rubric("C1")
    root = s.mention("Spend the money", "C1")
    (final,) = s.wait_finals("C1", root, 1)  # the run passes the budget alone: it ends, answered

    wait_for(
        lambda: value(metrics(s.bot), "rubric_bot_audits_skipped_total") == 1,
        RUN_TIMEOUT,
        message="the audit skipped",
    )
    assert "Tokens this run:" in final.all_text
    assert [r for r in s.model.requests("grader") if r.model == AUDIT_MODEL] == []
    assert (
        "audit of run" in s.bot.stderr_text() and "daily channel_usd limit is reached" in s.bot.stderr_text()
    )
