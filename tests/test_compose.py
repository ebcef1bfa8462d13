"""The compose files as an operator starts them: compose.yaml's schema upgraded once before the bots,
after a preflight that checks HTTP mode's settings; HTTP mode where ports are mapped; a healthcheck on
/readyz for every bot; compose.quickstart.yaml's one Socket Mode bot on SQLite. The commands they run
are run here with the environments they pass (the quickstart's bot against the stand-ins in
tests/e2e/test_quickstart_e2e.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.config import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
QUICKSTART = yaml.safe_load((ROOT / "compose.quickstart.yaml").read_text())
SERVICES = COMPOSE["services"]
BOTS = {
    name: service
    for name, service in SERVICES.items()
    if service.get("command", [None])[0] in ("serve", "worker") and "--check" not in service["command"]
}
(PREFLIGHT,) = [name for name, service in SERVICES.items() if "--check" in service.get("command", [])]
README_STOP_GRACE = 40
"""Seconds the README's systemd unit (TimeoutStopSec) and docker run (--stop-timeout) give a stopping bot."""


def env_file(text: str) -> dict[str, str]:
    """An env file as compose's env_file and `docker run --env-file` read it: comment lines skipped,
    everything after the first ``=`` the value."""
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return dict(line.split("=", 1) for line in lines)


def quickstart_env() -> dict[str, str]:
    """The .env the quickstart writes: .env.example as it is (its placeholders have the right shapes)."""
    return env_file((ROOT / ".env.example").read_text())


def run_service(
    service: dict[str, Any], env: dict[str, str], tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    """`service`'s command (the image's entrypoint is rubric-bot) with its env_file and environment."""
    environment = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        **env,
        **service.get("environment", {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "bot", *service["command"]],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_schema_is_upgraded_once_after_the_preflight_and_before_any_bot_starts():
    (upgrading,) = [
        name for name, service in SERVICES.items() if service.get("command", [])[:2] == ["db", "upgrade"]
    ]

    assert SERVICES[upgrading]["restart"] == "no" and SERVICES[PREFLIGHT]["restart"] == "no"
    assert SERVICES[upgrading]["depends_on"][PREFLIGHT] == {"condition": "service_completed_successfully"}
    for service in BOTS.values():
        assert service["depends_on"] == {upgrading: {"condition": "service_completed_successfully"}}


def test_bots_that_map_ports_serve_http_and_every_bot_is_healthy_only_when_ready():
    assert len(BOTS) == 3
    for service in BOTS.values():
        if service.get("ports"):
            assert "--http" in service["command"]
        probe = " ".join(service["healthcheck"]["test"])
        port = (
            service["command"][service["command"].index("--port") + 1]
            if "--port" in service["command"]
            else "9464"
        )
        assert f"http://127.0.0.1:{port}/readyz" in probe


def test_the_preflight_checks_the_mode_the_replicas_serve_in():
    modes = {
        flag
        for service in BOTS.values()
        for flag in service["command"]
        if flag in ("--http", "--socket-mode")
    }

    assert modes == {"--http"} and "--http" in SERVICES[PREFLIGHT]["command"]


def test_the_preflight_with_the_quickstarts_env_says_once_that_http_mode_needs_the_signing_secret(tmp_path):
    result = run_service(SERVICES[PREFLIGHT], quickstart_env(), tmp_path)

    assert result.returncode == 2 and result.stdout == ""
    (line,) = result.stderr.splitlines()
    assert line.startswith("rubric-bot: SLACK_SIGNING_SECRET is not set: ")


def test_the_preflight_passes_once_the_signing_secret_is_set(tmp_path):
    result = run_service(
        SERVICES[PREFLIGHT], quickstart_env() | {"SLACK_SIGNING_SECRET": "8f14e45f"}, tmp_path
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == (
        "rubric-bot: the settings are ready to serve in HTTP mode "
        "(database postgresql://rubricbot:***@postgres:5432/rubricbot)\n"
    )


def test_every_bot_is_given_more_time_to_stop_than_its_grace_and_the_same_as_the_readme_says():
    grace = Settings.model_fields["shutdown_grace"].default
    bots = [*BOTS.values(), *QUICKSTART["services"].values()]
    readme = (ROOT / "README.md").read_text()

    assert {service["stop_grace_period"] for service in bots} == {f"{README_STOP_GRACE}s"}
    assert grace < README_STOP_GRACE
    assert f"TimeoutStopSec={README_STOP_GRACE}" in readme and f"--stop-timeout {README_STOP_GRACE}" in readme


def test_the_quickstart_compose_runs_one_socket_mode_bot_on_sqlite_kept_on_a_volume():
    (bot,) = QUICKSTART["services"].values()
    (volume,) = bot["volumes"]
    name, mount = volume.split(":")

    assert bot["command"] == ["serve", "--socket-mode"] and "ports" not in bot
    assert bot["env_file"] == ".env"
    assert Path(bot["environment"]["RUBRIC_BOT_DB"]).parent == Path(mount) and name in QUICKSTART["volumes"]
    assert re.fullmatch(r"on-failure:\d", bot["restart"])  # a settings problem is not restarted for ever
    assert "http://127.0.0.1:9464/readyz" in " ".join(bot["healthcheck"]["test"])


def test_the_quickstart_compose_without_an_app_token_stops_with_one_line_naming_it(tmp_path):
    (bot,) = QUICKSTART["services"].values()
    env = {name: value for name, value in quickstart_env().items() if name != "SLACK_APP_TOKEN"}
    env["SLACK_SIGNING_SECRET"] = "8f14e45f"  # not HTTP mode either: the quickstart's app has no URL

    result = run_service(
        {**bot, "environment": {"RUBRIC_BOT_DB": str(tmp_path / "bot.sqlite")}}, env, tmp_path
    )

    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("rubric-bot: SLACK_APP_TOKEN is not set: ")


def test_env_example_holds_what_the_quickstart_needs_without_inline_comments():
    text = (ROOT / ".env.example").read_text()
    settings = env_file(text)

    assert set(settings) == {"SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "RUBRIC_BOT_MODEL", "OPENAI_API_KEY"}
    assert all("#" not in value and value == value.strip() for value in settings.values())
    assert "cp .env.example .env" in (ROOT / "README.md").read_text()


@pytest.mark.parametrize(("extras", "installed"), [("", "."), ("anthropic", ".[anthropic]"),
                                                   ("anthropic,google", ".[anthropic,google]")])  # fmt: skip
def test_the_dockerfile_installs_the_extras_given_as_a_build_argument(extras, installed):
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r'^ARG EXTRAS=""$', dockerfile, flags=re.M)
    (install,) = re.findall(r"^RUN (pip install .*)$", dockerfile, flags=re.M)

    # The RUN line as the image's /bin/sh runs it, with pip's arguments printed instead.
    shown = install.replace("pip install --no-cache-dir", "printf '%s\\n'")
    printed = subprocess.run(["/bin/sh", "-c", shown], env={"EXTRAS": extras}, capture_output=True, text=True)

    assert printed.stdout.splitlines() == [installed]
