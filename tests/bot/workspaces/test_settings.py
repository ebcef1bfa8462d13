"""A workspace's settings over the deployment's: defaults, the allowed models, the ceilings, and
what an admin's choices are checked against (pure), plus `RUBRIC_BOT_ALLOWED_MODELS`."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from bot.agent.models import ModelPair
from bot.agent.worker import configured_agents
from bot.config import DEFAULT_RUN_TOKEN_ESTIMATE, ConfigError, load_settings
from bot.db.workspace_settings import WorkspaceSettingsRow
from bot.limits.prices import estimated_usd
from bot.limits.quota import DailyLimits
from bot.workspaces.settings import (
    AdminChoices,
    Deployment,
    Resolved,
    SettingsInputError,
    checked_settings,
    resolve,
)

NOW = datetime(2026, 5, 4, 9, 30, tzinfo=UTC)
DEPLOYMENT = Deployment(
    worker_model="openai:gpt-4o-mini",
    grader_model="openai:gpt-4o",
    allowed_models=("openai:gpt-4o-mini", "openai:gpt-4o", "anthropic:claude-sonnet-4-5"),
    daily_requests_per_user=100,
    daily_tokens_per_channel=0,  # no budget: no ceiling
    rubric_editors=("UOPS",),
)


def stored(**values) -> WorkspaceSettingsRow:
    fields = dict(
        worker_model=None,
        grader_model=None,
        daily_requests_per_user=None,
        daily_tokens_per_channel=None,
        rubric_editors=None,
        updated_by="UADMIN",
        updated_at=NOW,
    )
    return WorkspaceSettingsRow(**(fields | values))


def check(**choices) -> WorkspaceSettingsRow:
    return checked_settings(DEPLOYMENT, AdminChoices(**choices), user="UADMIN", now=NOW)


def problems(**choices) -> dict[str, str]:
    with pytest.raises(SettingsInputError) as caught:
        check(**choices)
    return caught.value.problems


# -- resolution ------------------------------------------------------------------------------------


def test_a_workspace_that_set_nothing_has_the_deployments_settings():
    effective = resolve(DEPLOYMENT, None)

    assert effective.worker_model == Resolved("openai:gpt-4o-mini", "deployment")
    assert effective.grader_model == Resolved("openai:gpt-4o", "deployment")
    assert effective.daily_requests_per_user == Resolved(100, "deployment")
    assert effective.rubric_editors == Resolved(("UOPS",), "deployment")
    # A run reserves the cost of its estimated tokens at the dearer model, the grader's.
    reserved = estimated_usd(DEFAULT_RUN_TOKEN_ESTIMATE, ["openai:gpt-4o"])
    assert effective.limits == DailyLimits(requests_per_user=100, run_estimate_usd=reserved)


def test_a_workspaces_own_choices_apply_and_say_so_and_the_rest_stay_the_deployments():
    effective = resolve(
        DEPLOYMENT,
        stored(
            worker_model="anthropic:claude-sonnet-4-5", daily_requests_per_user=20, rubric_editors=("U0ADA",)
        ),
    )

    assert effective.worker_model == Resolved("anthropic:claude-sonnet-4-5", "workspace")
    assert effective.grader_model.source == "deployment"
    assert effective.models.worker == "anthropic:claude-sonnet-4-5"
    assert effective.models.grader == "openai:gpt-4o"
    # The workspace's worker is now the dearer model: its price sets the run's reservation.
    reserved = estimated_usd(DEFAULT_RUN_TOKEN_ESTIMATE, ["anthropic:claude-sonnet-4-5"])
    assert effective.limits == DailyLimits(requests_per_user=20, run_estimate_usd=reserved)
    assert effective.rubric_editors == Resolved(("U0ADA",), "workspace")


def test_a_model_the_operator_no_longer_allows_gives_way_to_the_deployments_and_says_why():
    effective = resolve(DEPLOYMENT, stored(grader_model="openai:o1-pro"))

    assert effective.grader_model.value == "openai:gpt-4o"
    assert effective.grader_model.source == "deployment"
    assert "openai:o1-pro is no longer among the allowed models" in str(effective.grader_model.set_aside)


def test_a_stored_limit_above_a_lowered_ceiling_gives_way_to_the_ceiling():
    lowered = Deployment(**{**DEPLOYMENT.__dict__, "daily_requests_per_user": 10})

    effective = resolve(lowered, stored(daily_requests_per_user=50))

    assert effective.daily_requests_per_user.value == 10
    assert effective.daily_requests_per_user.source == "deployment"
    assert "50 is above the deployment's limit" in str(effective.daily_requests_per_user.set_aside)


def test_a_workspace_may_lower_its_token_budget_under_the_deployments_and_not_raise_it():
    deployment = Deployment(
        **{**DEPLOYMENT.__dict__, "daily_tokens_per_workspace": 100_000, "daily_tokens": 9}
    )

    assert resolve(deployment, None).limits.tokens_per_workspace == 100_000
    assert (
        resolve(deployment, stored(daily_tokens_per_workspace=40_000)).limits.tokens_per_workspace == 40_000
    )
    raised = resolve(deployment, stored(daily_tokens_per_workspace=200_000))
    assert raised.limits.tokens_per_workspace == 100_000 and raised.daily_tokens_per_workspace.set_aside
    assert raised.limits.tokens_per_deployment == 9  # the deployment's own: no workspace changes it


def test_without_a_deployment_limit_a_workspace_may_set_any_even_none():
    assert resolve(DEPLOYMENT, stored(daily_tokens_per_channel=5000)).limits.tokens_per_channel == 5000
    unlimited = Deployment(**{**DEPLOYMENT.__dict__, "daily_requests_per_user": 0})
    assert resolve(unlimited, stored(daily_requests_per_user=0)).limits.requests_per_user is None


# -- an admin's choices ----------------------------------------------------------------------------


def test_permitted_choices_become_the_stored_settings_with_who_and_when():
    row = check(
        worker_model="openai:gpt-4o",
        daily_requests_per_user=" 1,00 ",
        daily_tokens_per_channel="250000",
        rubric_editors=["U0ADA", "S0LEADS", "U0ADA"],
    )

    assert row == stored(
        worker_model="openai:gpt-4o",
        daily_requests_per_user=100,
        daily_tokens_per_channel=250000,
        rubric_editors=("U0ADA", "S0LEADS"),
    )


def test_empty_choices_keep_the_deployments_values():
    assert check(daily_requests_per_user="", rubric_editors=[]) == stored()


def test_a_model_not_allowed_is_refused_naming_the_allowed_ones():
    assert problems(worker_model="openai:o1-pro") == {
        "worker_model": "openai:o1-pro is not among the models this deployment allows: "
        "openai:gpt-4o-mini, openai:gpt-4o, anthropic:claude-sonnet-4-5."
    }


@pytest.mark.parametrize(
    ("typed", "words"),
    [
        ("101", "101 is above the deployment's limit, 100"),
        ("0", "0 (no limit) would be above the deployment's limit of 100"),
        ("-5", "A limit can't be negative"),
        ("twenty", "`twenty` is not a whole number"),
        ("2.5", "`2.5` is not a whole number"),
    ],
)
def test_a_request_limit_the_ceiling_does_not_permit_is_refused_with_what_to_give(typed, words):
    found = problems(daily_requests_per_user=typed)["daily_requests_per_user"]

    assert words in found and "from 1 to 100" in found


def test_without_a_ceiling_only_the_columns_range_bounds_a_budget():
    assert check(daily_tokens_per_channel="0").daily_tokens_per_channel == 0
    assert (
        "above the most a limit can be"
        in problems(daily_tokens_per_channel="3000000000")["daily_tokens_per_channel"]
    )


def test_every_problem_is_named_at_once_on_its_own_setting():
    found = problems(grader_model="x:y", daily_requests_per_user="500", rubric_editors=["U0ADA", "bob"])

    assert sorted(found) == ["daily_requests_per_user", "grader_model", "rubric_editors"]
    assert "bob is not a Slack user or user-group id" in found["rubric_editors"]


def test_grader_samples_are_the_deployments_until_a_workspace_sets_its_own():
    assert resolve(DEPLOYMENT, None).grader_samples == Resolved(1, "deployment")
    assert resolve(DEPLOYMENT, stored(grader_samples=3)).grader_samples == Resolved(3, "workspace")
    assert check(grader_samples=" 5 ").grader_samples == 5
    assert check(grader_samples="").grader_samples is None


@pytest.mark.parametrize("typed", ["0", "10", "2.5", "three", "-1"])
def test_grader_samples_outside_1_to_9_are_refused_with_what_to_give(typed):
    found = problems(grader_samples=typed)["grader_samples"]

    assert f"`{typed}` is not a number of grader samples" in found and "from 1 to 9" in found


# -- RUBRIC_BOT_ALLOWED_MODELS ---------------------------------------------------------------------


def test_allowed_models_default_to_the_deployments_worker_and_grader(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_GRADER_MODEL", "openai:gpt-4o")

    assert load_settings().allowed_models == ("openai:gpt-4o-mini", "openai:gpt-4o")


def test_allowed_models_are_read_as_a_comma_separated_list(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_MODELS", " openai:gpt-4.1 , anthropic:claude-sonnet-4-5,")

    assert load_settings().allowed_models == ("openai:gpt-4.1", "anthropic:claude-sonnet-4-5")


def test_a_malformed_allowed_model_is_named_by_its_entry_not_its_text(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_MODELS", "openai:gpt-4o,gpt 4o secret")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    message = str(caught.value)
    assert 'RUBRIC_BOT_ALLOWED_MODELS is invalid (entry 2 is not a "provider:model" id)' in message
    assert "secret" not in message


def test_an_allowed_model_that_cannot_load_stops_the_start_naming_the_setting(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.delenv("MISTRAL_API_KEY", raising=False)
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_MODELS", "openai:gpt-4o-mini,mistralai:mistral-large-latest")

    with pytest.raises(ConfigError) as caught:
        configured_agents(load_settings(), InMemorySaver())

    assert "RUBRIC_BOT_ALLOWED_MODELS (mistralai:mistral-large-latest)" in str(caught.value)


def test_the_agents_answer_with_each_allowed_pair_and_the_deployments_by_default(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_MODELS", "openai:gpt-4o-mini,openai:gpt-4.1")

    agents = configured_agents(load_settings(), InMemorySaver())

    assert agents.agent(ModelPair("openai:gpt-4o-mini", "openai:gpt-4o-mini")) is agents.default
    chosen = agents.agent(ModelPair("openai:gpt-4.1", "openai:gpt-4o-mini"))
    assert chosen is not agents.default
    assert chosen is agents.agent(ModelPair("openai:gpt-4.1", "openai:gpt-4o-mini"))  # built once


def test_an_allowed_model_too_long_for_a_slack_menu_is_refused(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_MODELS", "openai:" + "x" * 150)

    with pytest.raises(ConfigError, match="entry 1 is longer than 150 characters"):
        load_settings()
