"""Configuration: defaults, .env, and one clear message for every problem (never a token's value)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from bot.agent import models
from bot.agent.models import PROVIDERS, init_models, install_command
from bot.cli.main import main
from bot.config import (
    DEFAULT_MODEL_TIMEOUT,
    DEFAULT_RUN_TIMEOUT,
    DEFAULT_SLACK_API_URL,
    RUN_TIMEOUT_FACTOR,
    ConfigError,
    load_settings,
)
from bot.db.database import STORE_POOL_SIZE
from tests.standins import free_port
from tests.standins.slack_api import SlackApiStandin

ROOT = Path(__file__).resolve().parents[2]

ALL_SETTINGS = (
    "SLACK_BOT_TOKEN",
    "SLACK_SIGNING_SECRET",
    "SLACK_APP_TOKEN",
    "SLACK_API_URL",
    "RUBRIC_BOT_MODEL",
    "RUBRIC_BOT_GRADER_MODEL",
    "RUBRIC_BOT_MAX_ITERATIONS",
    "RUBRIC_BOT_MAX_GRADER_CALLS",
    "RUBRIC_BOT_DB",
    "RUBRIC_BOT_SHUTDOWN_GRACE",
    "RUBRIC_BOT_SLACK_RETRY_BACKOFF",
    "RUBRIC_BOT_MODEL_TIMEOUT",
    "RUBRIC_BOT_RUN_TIMEOUT",
    "RUBRIC_BOT_THREAD_CONTEXT_CHARS",
    "RUBRIC_BOT_MAX_FILE_BYTES",
    "RUBRIC_BOT_METRICS_PORT",
    "RUBRIC_BOT_DB_POOL_SIZE",
    "RUBRIC_BOT_AUDIT_MODEL",
    "RUBRIC_BOT_AUDIT_SHARE",
    "RUBRIC_BOT_SHADOW_GRADER_MODEL",
    "RUBRIC_BOT_SHADOW_SHARE",
    "RUBRIC_BOT_GRADER_SAMPLES",
    "RUBRIC_BOT_ESCALATION_MODEL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No inherited settings and no stray .env: each test states its whole configuration."""
    for name in ALL_SETTINGS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults_when_only_the_required_settings_are_given(monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "s3cret")
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")

    settings = load_settings(["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "RUBRIC_BOT_MODEL"])

    assert settings.slack_api_url == DEFAULT_SLACK_API_URL
    assert settings.max_iterations == 3
    assert settings.database.sqlite_path == Path("rubric-bot.sqlite")
    assert settings.grader_model_override is None  # the grader is the worker's model
    assert not settings.socket_mode
    assert (settings.model_timeout, settings.run_timeout) == (DEFAULT_MODEL_TIMEOUT, DEFAULT_RUN_TIMEOUT)
    assert settings.metrics_port == 9464


def test_the_metrics_port_must_be_a_tcp_port(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_METRICS_PORT", "70000")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    message = str(caught.value)
    assert "RUBRIC_BOT_METRICS_PORT is invalid" in message and "TCP port (1-65535)" in message


def test_grader_model_and_socket_mode_follow_their_settings(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_GRADER_MODEL", "anthropic:claude-sonnet-4-5")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-abc")

    settings = load_settings()

    assert settings.grader_model_override == "anthropic:claude-sonnet-4-5"
    assert settings.socket_mode


def test_the_audit_share_is_none_without_an_audit_model_a_tenth_with_one_and_between_0_and_1(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_AUDIT_SHARE", "0.5")
    assert load_settings().audit_share == 0  # no audit model, no audit
    monkeypatch.delenv("RUBRIC_BOT_AUDIT_SHARE")
    monkeypatch.setenv("RUBRIC_BOT_AUDIT_MODEL", "openai:gpt-4o")
    assert load_settings().audit_share == 0.1
    monkeypatch.setenv("RUBRIC_BOT_AUDIT_SHARE", "1")
    assert load_settings().audit_share == 1

    monkeypatch.setenv("RUBRIC_BOT_AUDIT_SHARE", "1.5")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "RUBRIC_BOT_AUDIT_SHARE is invalid" in str(caught.value)
    assert "a number from 0 to 1" in str(caught.value)


def test_the_shadow_share_is_none_without_a_shadow_model_a_tenth_with_one_and_between_0_and_1(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_SHADOW_SHARE", "0.5")
    assert load_settings().shadow_share == 0  # no shadow model, no shadow grades
    monkeypatch.delenv("RUBRIC_BOT_SHADOW_SHARE")
    monkeypatch.setenv("RUBRIC_BOT_SHADOW_GRADER_MODEL", "openai:gpt-4o")
    assert load_settings().shadow_share == 0.1
    monkeypatch.setenv("RUBRIC_BOT_SHADOW_SHARE", "0")
    assert load_settings().shadow_share == 0

    for bad in ("-0.1", "1.01", "a tenth"):
        monkeypatch.setenv("RUBRIC_BOT_SHADOW_SHARE", bad)
        with pytest.raises(ConfigError) as caught:
            load_settings()
        assert "RUBRIC_BOT_SHADOW_SHARE is invalid" in str(caught.value)
        assert "a number from 0 to 1" in str(caught.value)


def test_the_grader_is_asked_once_unless_more_samples_are_set_as_a_whole_number_of_at_least_1(monkeypatch):
    assert (load_settings().grader_samples, load_settings().escalation_model) == (1, None)
    monkeypatch.setenv("RUBRIC_BOT_GRADER_SAMPLES", "3")
    monkeypatch.setenv("RUBRIC_BOT_ESCALATION_MODEL", "openai:gpt-4.1")
    assert (load_settings().grader_samples, load_settings().escalation_model) == (3, "openai:gpt-4.1")

    for bad in ("0", "2.5", "three"):
        monkeypatch.setenv("RUBRIC_BOT_GRADER_SAMPLES", bad)
        with pytest.raises(ConfigError) as caught:
            load_settings()
        assert "RUBRIC_BOT_GRADER_SAMPLES is invalid" in str(caught.value)
        assert "a whole number, at least 1" in str(caught.value)


def test_the_run_timeout_follows_the_model_timeout_unless_set(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_MODEL_TIMEOUT", "30")
    assert load_settings().run_timeout == 30 * RUN_TIMEOUT_FACTOR

    monkeypatch.setenv("RUBRIC_BOT_RUN_TIMEOUT", "45.5")
    assert (load_settings().model_timeout, load_settings().run_timeout) == (30, 45.5)


def test_the_store_keeps_ten_postgresql_connections_unless_set_to_another_whole_number(monkeypatch):
    assert load_settings().db_pool_size == STORE_POOL_SIZE == 10
    monkeypatch.setenv("RUBRIC_BOT_DB_POOL_SIZE", "3")
    assert load_settings().db_pool_size == 3
    monkeypatch.setenv("RUBRIC_BOT_DB_POOL_SIZE", "0")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    message = str(caught.value)
    assert "RUBRIC_BOT_DB_POOL_SIZE is invalid" in message and "connections each process keeps" in message


def test_timeouts_must_be_positive_numbers(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_MODEL_TIMEOUT", "0")
    monkeypatch.setenv("RUBRIC_BOT_RUN_TIMEOUT", "soon")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    message = str(caught.value)
    assert "RUBRIC_BOT_MODEL_TIMEOUT is invalid" in message and "seconds one model call" in message
    assert "RUBRIC_BOT_RUN_TIMEOUT is invalid" in message and "seconds one whole request" in message


def test_grader_calls_per_iteration_default_to_six_and_must_be_a_positive_whole_number(monkeypatch):
    assert load_settings().max_grader_calls == 6
    monkeypatch.setenv("RUBRIC_BOT_MAX_GRADER_CALLS", "3")
    assert load_settings().max_grader_calls == 3

    monkeypatch.setenv("RUBRIC_BOT_MAX_GRADER_CALLS", "0")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert "RUBRIC_BOT_MAX_GRADER_CALLS is invalid" in str(caught.value)
    assert "grader model calls per iteration" in str(caught.value)


def test_what_the_bot_reads_of_threads_and_files_is_bounded_by_positive_whole_numbers(monkeypatch):
    settings = load_settings()
    assert (settings.thread_context_chars, settings.max_file_bytes) == (20_000, 1_000_000)
    monkeypatch.setenv("RUBRIC_BOT_THREAD_CONTEXT_CHARS", "500")
    monkeypatch.setenv("RUBRIC_BOT_MAX_FILE_BYTES", "2048")
    assert (load_settings().thread_context_chars, load_settings().max_file_bytes) == (500, 2048)

    monkeypatch.setenv("RUBRIC_BOT_THREAD_CONTEXT_CHARS", "0")
    monkeypatch.setenv("RUBRIC_BOT_MAX_FILE_BYTES", "1MB")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert "RUBRIC_BOT_THREAD_CONTEXT_CHARS is invalid" in message and "earlier messages" in message
    assert "RUBRIC_BOT_MAX_FILE_BYTES is invalid" in message and "largest attached file" in message
    assert "1MB" not in message


def test_both_models_are_given_the_model_timeout(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("RUBRIC_BOT_GRADER_MODEL", "openai:gpt-4o")
    monkeypatch.setenv("RUBRIC_BOT_MODEL_TIMEOUT", "7.5")

    worker, grader = init_models(load_settings())

    assert worker.request_timeout == grader.request_timeout == 7.5


def test_api_url_gets_the_trailing_slash_slack_sdk_needs(monkeypatch):
    monkeypatch.setenv("SLACK_API_URL", "http://127.0.0.1:9999/api")

    assert load_settings().slack_api_url == "http://127.0.0.1:9999/api/"


def test_dotenv_file_is_read_and_empty_values_count_as_unset(tmp_path):
    (tmp_path / ".env").write_text(
        "RUBRIC_BOT_MODEL=openai:gpt-4o-mini\nRUBRIC_BOT_MAX_ITERATIONS=5\nSLACK_APP_TOKEN=\n"
        "OPENAI_API_KEY=not-a-setting\n"
    )

    settings = load_settings(["RUBRIC_BOT_MODEL"])

    assert settings.worker_model == "openai:gpt-4o-mini"
    assert settings.max_iterations == 5
    assert not settings.socket_mode


def test_environment_wins_over_dotenv(monkeypatch, tmp_path):
    (tmp_path / ".env").write_text("RUBRIC_BOT_MAX_ITERATIONS=5\n")
    monkeypatch.setenv("RUBRIC_BOT_MAX_ITERATIONS", "2")

    assert load_settings().max_iterations == 2


def test_every_problem_is_named_in_one_error(monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxp-user-token-secret-value")
    monkeypatch.setenv("RUBRIC_BOT_MAX_ITERATIONS", "0")
    monkeypatch.setenv("SLACK_API_URL", "slack.com/api")

    with pytest.raises(ConfigError) as caught:
        load_settings(["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "RUBRIC_BOT_MODEL"])

    message = str(caught.value)
    for name in ("SLACK_BOT_TOKEN", "RUBRIC_BOT_MAX_ITERATIONS", "SLACK_API_URL"):
        assert f"{name} is invalid" in message
    for name in ("SLACK_SIGNING_SECRET", "RUBRIC_BOT_MODEL"):
        assert f"{name} is not set" in message
    assert len(caught.value.problems) == 5
    assert "xoxb-" in message  # says what a bot token looks like
    assert "xoxp-user-token-secret-value" not in message


def test_bad_app_token_is_reported_without_its_value(monkeypatch):
    monkeypatch.setenv("SLACK_APP_TOKEN", "xoxb-pasted-into-the-wrong-variable")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    assert "SLACK_APP_TOKEN is invalid" in str(caught.value)
    assert "pasted-into-the-wrong-variable" not in str(caught.value)


def test_an_encryption_key_that_is_not_a_fernet_key_is_named_without_its_value(monkeypatch):
    good = Fernet.generate_key().decode()
    monkeypatch.setenv("RUBRIC_BOT_ENCRYPTION_KEY", f"{good}, not-a-key-but-a-secret-anyway")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    message = str(caught.value)
    assert "RUBRIC_BOT_ENCRYPTION_KEY is invalid" in message and "entry 2 is not a Fernet key" in message
    assert "not-a-key-but-a-secret-anyway" not in message and good not in message


def test_install_allowlists_take_workspace_and_org_ids_and_name_a_wrong_entry(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_TEAMS", "T0123ABCD, T0456EFGH,")
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_ENTERPRISES", "E0123ABCD,T0456EFGH")

    with pytest.raises(ConfigError) as caught:
        load_settings()

    (line,) = caught.value.problems
    assert "RUBRIC_BOT_ALLOWED_ENTERPRISES is invalid (entry 2 is not an Enterprise Grid org id" in line
    monkeypatch.setenv("RUBRIC_BOT_ALLOWED_ENTERPRISES", "E0123ABCD")
    settings = load_settings()
    assert settings.allowed_teams == ("T0123ABCD", "T0456EFGH")
    assert settings.allowed_enterprises == ("E0123ABCD",)


def test_encryption_keys_are_kept_in_order_and_do_not_print(monkeypatch):
    new, old = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    monkeypatch.setenv("RUBRIC_BOT_ENCRYPTION_KEY", f"{new},{old},")

    settings = load_settings()

    assert [key.get_secret_value() for key in settings.encryption_keys] == [new, old]
    assert new not in repr(settings)


def test_tokens_do_not_print_from_settings(monkeypatch):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-very-secret")
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "signing-very-secret")

    settings = load_settings()

    assert "very-secret" not in repr(settings)
    assert "very-secret" not in str(settings)


VALID_HTTP_SETTINGS = {
    "SLACK_BOT_TOKEN": "xoxb-1",
    "SLACK_SIGNING_SECRET": "s3cret",
    "RUBRIC_BOT_MODEL": "openai:gpt-4o-mini",
    "OPENAI_API_KEY": "test",
}
"""Settings `serve --http` accepts, for tests whose failure comes after the settings are read."""


def serve_http(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`rubric-bot serve --http` in a process of its own with only ``env`` (and PATH, and the
    PYTHONPATH of the tree under test) set."""
    tree = {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}
    return subprocess.run(
        [sys.executable, "-m", "bot", "serve", "--http", *args],
        cwd=cwd,
        env={"PATH": "/usr/bin:/bin", **tree, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_serve_with_bad_settings_exits_2_with_one_message_and_no_traceback(tmp_path):
    result = serve_http(
        tmp_path, {"SLACK_BOT_TOKEN": "not-a-token-hunter2", "RUBRIC_BOT_MAX_ITERATIONS": "many"}
    )

    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "hunter2" not in result.stderr + result.stdout
    for name in ("SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET", "RUBRIC_BOT_MODEL", "RUBRIC_BOT_MAX_ITERATIONS"):
        assert name in result.stderr


def test_serve_with_only_a_bot_token_names_both_ways_to_hear_from_slack(monkeypatch, capsys):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")

    assert main(["serve"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "SLACK_APP_TOKEN or SLACK_SIGNING_SECRET is not set" in line
    assert "Socket Mode" in line and "xapp-" in line  # the README's way
    assert "rubric-bot serve --http" in line  # the other way


def test_serve_http_still_needs_the_signing_secret_alone(monkeypatch, capsys):
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1")
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")

    assert main(["serve", "--http"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rubric-bot: SLACK_SIGNING_SECRET is not set")


@pytest.fixture
def rubric(tmp_path) -> Path:
    path = tmp_path / "rubric.txt"
    path.write_text("- Cites a source\n")
    return path


def test_a_missing_provider_key_is_named_instead_of_the_model(monkeypatch, capsys, rubric):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")

    assert main(["grade", "--rubric", str(rubric), "A request"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("rubric-bot: OPENAI_API_KEY is not set")
    assert "RUBRIC_BOT_MODEL (openai:gpt-4o-mini) needs it" in line
    assert "cannot be used" not in line


def test_a_provider_whose_package_is_missing_says_what_to_install(monkeypatch, capsys, rubric):
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:gpt-4o-mini")
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("RUBRIC_BOT_GRADER_MODEL", "anthropic:claude-sonnet-4-5")
    monkeypatch.setitem(sys.modules, "langchain_anthropic", None)  # not installed, even if it is here

    assert main(["grade", "--rubric", str(rubric), "A request"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    grader = "RUBRIC_BOT_GRADER_MODEL (anthropic:claude-sonnet-4-5)"
    assert f"{grader} needs the langchain-anthropic package" in line
    assert install_command("anthropic", "langchain-anthropic") in line
    assert "rubric-bot[anthropic]" not in line  # no index has rubric-bot under that name


class Installed:
    """A stand-in for `importlib.metadata.distribution("rubric-bot")`: what pip recorded of where
    it was installed from (None: installed by name from an index)."""

    def __init__(self, direct_url: str | None) -> None:
        self.direct_url = direct_url

    def read_text(self, name: str) -> str | None:
        return self.direct_url if name == "direct_url.json" else None


@pytest.mark.parametrize(
    ("direct_url", "command"),
    [
        ('{"dir_info": {"editable": true}, "url": "file:///home/me/rubric-bot"}',
         "pip install -e '/home/me/rubric-bot[anthropic]'"),
        ('{"dir_info": {}, "url": "file:///app"}',
         "pip install '/app[anthropic]' (for the Docker image: docker build --build-arg EXTRAS=anthropic .)"),
        (None, "pip install langchain-anthropic"),
    ],
    ids=["editable-checkout", "installed-from-a-directory", "from-an-index"],
)  # fmt: skip
def test_the_install_suggested_is_the_command_that_works_for_this_installation(
    monkeypatch, direct_url, command
):
    monkeypatch.setattr(models, "distribution", lambda name: Installed(direct_url))

    assert install_command("anthropic", "langchain-anthropic") == command


QUICKSTART_ENV_WITH_COMMENTS = """\
SLACK_BOT_TOKEN=xoxb-1
SLACK_APP_TOKEN=xapp-1
RUBRIC_BOT_MODEL=openai:gpt-4o-mini   # the worker, any langchain "provider:model"
OPENAI_API_KEY=sk-hunter2                 # the provider's key
"""
"""The quickstart's `.env` as the README once showed it, with comments after the values."""


def env_file_as_docker_reads_it(text: str) -> dict[str, str]:
    """`docker run --env-file`'s reading of an env file: whole lines of comments are skipped, and
    everything after the first ``=`` is the value, inline comments and spaces included."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def test_serve_given_an_env_file_with_inline_comments_stops_naming_each_setting_before_serving(tmp_path):
    environment = env_file_as_docker_reads_it(QUICKSTART_ENV_WITH_COMMENTS)

    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), **environment},
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 2 and result.stdout == ""
    model, key = result.stderr.splitlines()
    assert model.startswith(
        "rubric-bot: RUBRIC_BOT_MODEL looks like it carries a comment: "
        "'openai:gpt-4o-mini   # the worker, any langchain \"provider:model\"'. "
    )
    assert "put the comment on a line of its own" in model
    assert key.startswith("rubric-bot: OPENAI_API_KEY looks like it carries a comment (value not shown")
    assert "hunter2" not in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("RUBRIC_BOT_MAX_ITERATIONS", "3 ",
         "RUBRIC_BOT_MAX_ITERATIONS has spaces or tabs around its value: '3 '"),
        ("RUBRIC_BOT_GRADER_MODEL", '"openai:gpt-4o"',
         "RUBRIC_BOT_GRADER_MODEL is wrapped in quotes: '\"openai:gpt-4o\"'"),
        ("SLACK_BOT_TOKEN", "xoxb-hunter2\t",
         "SLACK_BOT_TOKEN has spaces or tabs around its value (value not shown"),
        ("RUBRIC_BOT_DB", "postgresql://u:hunter2@db/x # prod",
         "RUBRIC_BOT_DB looks like it carries a comment (value not shown"),
        ("ANTHROPIC_API_KEY", "'sk-hunter2'", "ANTHROPIC_API_KEY is wrapped in quotes (value not shown"),
    ],
    ids=["trailing-space", "quoted", "token-with-a-tab", "database-url", "provider-key-quoted"],
)  # fmt: skip
def test_a_value_carrying_padding_quotes_or_a_comment_is_one_line_naming_its_setting(
    monkeypatch, name, value, words
):
    monkeypatch.setenv(name, value)

    with pytest.raises(ConfigError) as refused:
        load_settings()

    (line,) = refused.value.problems
    assert line.startswith(words) and "hunter2" not in line


def test_a_value_with_a_hash_inside_it_is_taken_as_it_is(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_MODEL", "openai:ft:gpt-4o-mini:team#3")

    assert load_settings().worker_model == "openai:ft:gpt-4o-mini:team#3"


def test_a_dot_env_files_inline_comments_are_comments(monkeypatch, tmp_path):
    # python-dotenv (the bot's own reading of .env) strips them; only --env-file keeps them.
    (tmp_path / ".env").write_text(QUICKSTART_ENV_WITH_COMMENTS)

    settings = load_settings()

    assert settings.worker_model == "openai:gpt-4o-mini"


def test_each_providers_extra_installs_its_package():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]

    for provider in PROVIDERS.values():
        if provider.extra is not None:
            (requirement,) = extras[provider.extra]
            assert requirement.startswith(provider.package + ">=")
    readme = (ROOT / "README.md").read_text()
    assert "Only the OpenAI integration is installed by default" in readme
    assert "pip install -e '.[anthropic]'" in readme


def test_a_database_in_a_missing_directory_is_one_line_and_exit_2(tmp_path):
    database = str(tmp_path / "nonexistent" / "dir" / "x.sqlite")

    result = serve_http(tmp_path, {**VALID_HTTP_SETTINGS, "RUBRIC_BOT_DB": database}, "--port", "9")

    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("rubric-bot: RUBRIC_BOT_DB is in a directory that does not exist")
    assert str(tmp_path / "nonexistent" / "dir") in line


def test_the_database_is_a_sqlite_path_or_a_postgresql_url(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_DB", "postgresql://bot:s3cret@db.internal:5432/rubric")
    database = load_settings().database
    assert database.is_postgres and str(database) == "postgresql://bot:***@db.internal:5432/rubric"
    monkeypatch.setenv("RUBRIC_BOT_DB", "data/bot.sqlite")
    assert load_settings().database.sqlite_path == Path("data/bot.sqlite")


def test_an_unsupported_database_url_is_explained(monkeypatch):
    monkeypatch.setenv("RUBRIC_BOT_DB", "mysql://bot:s3cret@db.internal/rubric")
    with pytest.raises(ConfigError) as error:
        load_settings()
    message = str(error.value)
    assert "RUBRIC_BOT_DB is invalid (mysql:// is not supported" in message and "postgresql://" in message
    assert "s3cret" not in message


def test_a_taken_http_port_is_one_line_not_a_traceback(tmp_path):
    # The bot token is checked with Slack before the port is opened: a stand-in accepts it.
    with socket.socket() as taken, SlackApiStandin(token=VALID_HTTP_SETTINGS["SLACK_BOT_TOKEN"]) as slack:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        settings = {
            **VALID_HTTP_SETTINGS,
            "SLACK_API_URL": slack.api_url,
            "NO_PROXY": "127.0.0.1",
            "RUBRIC_BOT_METRICS_PORT": str(free_port()),
        }
        result = serve_http(tmp_path, settings, "--port", str(port))

    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("rubric-bot:")]
    assert len(errors) == 1 and errors[0].startswith("rubric-bot: cannot serve: ")
    assert "address already in use" in errors[0]


def test_a_metrics_port_that_is_the_http_port_is_one_line_and_exit_2(tmp_path):
    # /metrics is never on Slack's public port: the two cannot be one.
    settings = {**VALID_HTTP_SETTINGS, "RUBRIC_BOT_METRICS_PORT": "3000"}

    result = serve_http(tmp_path, settings, "--port", "3000")

    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("rubric-bot: RUBRIC_BOT_METRICS_PORT is serve's --port too (3000): ")
