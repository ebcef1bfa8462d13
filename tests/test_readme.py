"""The README as a new operator follows it: what to install, the two commands, and where to look
when something goes wrong."""

from __future__ import annotations

import argparse
import re
import shlex
import shutil
import sqlite3
import stat
import subprocess
import sys
import tomllib
from contextlib import closing
from pathlib import Path

from bot.cli.main import build_parser
from bot.config import Settings
from bot.db.database import PRIVILEGES_NEEDED
from bot.listeners.rubric_command import RUBRIC_SUBCOMMANDS
from tests.readme_samples import samples

ROOT = Path(__file__).resolve().parents[1]

METRIC_NAMES = (
    "rubric_bot_runs_total",
    "rubric_bot_run_seconds",
    "rubric_bot_grader_calls_total",
    "rubric_bot_tokens_total",
    "rubric_bot_cost_usd_total",
    "rubric_bot_unpriced_runs_total",
    "rubric_bot_queue_jobs",
    "rubric_bot_slack_errors_total",
)
"""The metrics the README's table explains (each is asserted on /metrics in tests/e2e/test_ops_e2e.py)."""
README = (ROOT / "README.md").read_text()


def shell_lines(text: str = README) -> list[str]:
    """Every line of the ```bash blocks in `text`: the commands a reader runs."""
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [line.strip() for block in blocks for line in block.splitlines() if line.strip()]


def section(title: str) -> str:
    """The text of the README's `## title` section."""
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, flags=re.S | re.M)
    assert match, f"the README has no '## {title}' section"
    return match.group(1)


def test_the_python_version_it_states_is_the_one_pyproject_requires():
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]

    assert required == ">=3.11"
    assert "Python 3.11 or newer" in section("Install and test")


def test_install_starts_from_a_clone_and_says_how_a_new_shell_gets_the_environment_back():
    install = section("Install and test")

    assert shell_lines()[0].startswith("git clone ")
    assert "A new shell needs the environment again" in install and ". .venv/bin/activate" in install


def test_the_quickstart_has_one_command_to_run_the_bot_and_one_to_run_the_tests():
    lines = shell_lines(section("Install and test") + section("Run the bot in Slack"))

    assert [line for line in lines if line.startswith("rubric-bot serve")] == ["rubric-bot serve"]
    assert [line for line in lines if "pytest" in line] == ["python -m pytest -n auto"]


def test_troubleshooting_covers_what_goes_wrong_in_the_first_hour():
    text = " ".join(section("Troubleshooting").split())

    for words in ("can't reach Slack", "says nothing in a channel", "/invite", "401s in HTTP mode",
                  "SLACK_SIGNING_SECRET", "Model errors", "was refused by Slack"):  # fmt: skip
        assert words in text


def test_deploying_says_how_to_run_it_as_a_service_where_the_data_lives_and_how_to_back_it_up():
    text = section("Deploying")

    assert "ExecStart=/srv/rubric-bot/.venv/bin/rubric-bot serve" in text  # systemd
    assert re.search(r"`docker run [^`]*rubric-bot serve`", text)  # a container
    assert "RUBRIC_BOT_DB" in text and "**Backups.**" in text and ".backup(" in text


def test_the_backup_commands_write_a_copy_only_the_bots_account_can_read(tmp_path):
    python, sqlite = r"python -c \"[^`]*\.backup\([^`]*", r"\(umask [^`]*\.backup [^`]*"
    commands = re.findall(rf"`({python}|{sqlite})`", section("Deploying"))
    assert len(commands) == 2, commands
    with closing(sqlite3.connect(tmp_path / "rubric-bot.sqlite")) as db:
        db.execute("CREATE TABLE t (x)")
        db.execute("INSERT INTO t VALUES ('kept')")
        db.commit()
    for command in commands:
        if command.startswith("(umask") and shutil.which("sqlite3") is None:
            continue  # the sqlite3 command-line tool is not installed here
        backup = tmp_path / "backup.sqlite"
        backup.unlink(missing_ok=True)
        shell = command.replace("python -c", f"{shlex.quote(sys.executable)} -c", 1)
        subprocess.run(shell, shell=True, cwd=tmp_path, check=True, timeout=60)
        with closing(sqlite3.connect(backup)) as copy:
            assert copy.execute("SELECT x FROM t").fetchall() == [("kept",)]
        assert stat.S_IMODE(backup.stat().st_mode) & 0o077 == 0, (command, oct(backup.stat().st_mode))


def test_how_it_is_built_names_every_folder_of_bot_and_where_their_maps_are():
    text = section("How it is built")
    folders = sorted(p.parent.name for p in (ROOT / "bot").glob("*/__init__.py"))

    assert folders and all(f"`{folder}/`" in text for folder in folders)
    assert "`__init__.py` docstring is its map" in text


def test_every_setting_is_documented():
    missing = [
        f.validation_alias for f in Settings.model_fields.values() if f"`{f.validation_alias}`" not in README
    ]
    assert missing == []


def test_it_says_what_the_bot_reads_and_the_limits():
    reads = section("What the bot reads")
    for needed in (
        "RUBRIC_BOT_THREAD_CONTEXT_CHARS",
        "RUBRIC_BOT_MAX_FILE_BYTES",
        "files:read",
        "PDF",
        "not instructions",
    ):
        assert needed in reads


def test_troubleshooting_quotes_the_start_up_and_database_lines_the_bot_prints():
    # The e2e tests (tests/e2e/test_startup_e2e.py) pin that the bot prints these very lines.
    text = " ".join(section("Troubleshooting").split())

    assert "INFO bot.ops.startup: rubric-bot 0.1.0 starting: HTTP mode on port 3000, database " in text
    assert (
        "rubric-bot: cannot use the database postgresql://rubricbot:***@db.internal:5432/rubricbot: " in text
    )
    assert "(or start with --wait-for-db to wait for it)" in text
    assert f"({PRIVILEGES_NEEDED})" in text
    assert "WARNING bot.ops.startup: could not use the database postgresql://… (attempt N): " in text


def test_troubleshooting_quotes_the_lines_the_bot_logs_when_the_database_or_slack_fails():
    # The bot prints these very lines in tests/e2e/test_faults_e2e.py (the database down or restarted,
    # runs taken over, Slack answering 503) and tests/bot/threads/test_runner.py (giving up).
    text = " ".join(section("Troubleshooting").split())

    for line in (
        "ERROR bot.slack.client: could not take event app_mention: the database is unavailable (<reason>)",
        "WARNING bot.threads.runner: run N in thread T…:C…:TS: the database failed (<reason>); "
        "resuming it from its checkpoint in 2s",
        "given up after 3 attempts, the database failing each time (<reason>)",
        "WARNING bot.queue.jobs: re-queued job N of thread …: its worker stopped beating",
        "was taken over by another process while this one could not reach the database; leaving the "
        "thread to it",
        "WARNING bot.threads.delivery: Slack refused a message for thread … (<error>); "
        "retrying for up to 600s",
        "gave up posting N message(s) in thread …: Slack refused them for 600s",
        "ended satisfied, but its answer never reached the thread",
    ):
        assert line in text, line


def test_running_at_scale_states_the_privileges_and_what_health_and_metrics_show():
    text = " ".join(section("Running at scale").split())

    assert "must own the database, or have `CREATE` on the schema" in text
    assert "`rubric-bot db upgrade (HOST)`" in text  # tests/e2e/test_startup_e2e.py sees that name
    for name in ("/healthz", "/readyz", "/metrics", "RUBRIC_BOT_METRICS_PORT", *METRIC_NAMES):
        assert name in text


def test_limits_and_permissions_names_every_guardrail_setting_and_command():
    text = section("Limits and permissions")

    for needed in (
        "`RUBRIC_BOT_DAILY_REQUESTS_PER_USER`",
        "`RUBRIC_BOT_DAILY_TOKENS_PER_CHANNEL`",
        "`RUBRIC_BOT_CHANNEL_DAILY_USD`",
        "`RUBRIC_BOT_WORKSPACE_DAILY_USD`",
        "`RUBRIC_BOT_DAILY_USD`",
        "`RUBRIC_BOT_RUBRIC_EDITORS`",
        "`RUBRIC_BOT_REPLAY_COOLDOWN`",
        "`RUBRIC_BOT_ALLOWED_MODELS`",
        "/rubric admin",
        "/rubric usage",
        "rubric-bot usage",
        "/rubric history",
        "/rubric revert N",
        "ref 7f3a2c",
    ):
        assert needed in text, needed


def test_your_data_says_what_is_stored_for_how_long_and_how_to_delete_it():
    text = " ".join(section("Your data").split())

    for words in ("**What is stored**", "**For how long:**", "RUBRIC_BOT_RETENTION_DAYS",
                  "**How to delete it:**", "delete it in Slack", "rubric-bot db prune --days N",
                  "rubric-bot db purge --team T", "Uninstalling the app", "0600"):  # fmt: skip
        assert words in text


def test_the_sample_outputs_are_what_the_code_prints(tmp_path):
    shown = dict(re.findall(r"<!-- sample: (\w+) -->\n```text\n(.*?)\n```", README, flags=re.S))

    rendered = samples(tmp_path)

    assert set(shown) == set(rendered), "each sample of tests/readme_samples.py appears once in README.md"
    for name, text in rendered.items():
        assert shown[name] == text, (
            f"README's {name} sample is stale: python -m tests.readme_samples prints it"
        )


def test_the_final_messages_sample_ends_with_its_cost_line():
    final = re.search(r"<!-- sample: final -->\n```text\n(.*?)\n```", README, flags=re.S)

    assert final and re.search(r"^Tokens this run: .* · \$\d+\.\d{4}$", final.group(1), flags=re.M)


def readme_commands() -> list[str]:
    """Every `rubric-bot …` command README shows, in code spans and in ```bash blocks, as written."""
    spans = re.findall(r"`(rubric-bot [^`]+)`", README)
    lines = [line.split("#")[0].strip() for line in shell_lines() if line.startswith("rubric-bot ")]
    embedded = re.findall(r"ExecStart=\S*/(rubric-bot [^\n]+)", README)
    return [*spans, *lines, *embedded]


def parser_of(words: list[str]) -> tuple[argparse.ArgumentParser, list[str]]:
    """The (sub)parser the command `words` (after `rubric-bot`) reaches, and the words left."""
    parser = build_parser()
    while words:
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or words[0] not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[words.pop(0)]
    return parser, words


def test_every_command_and_flag_the_readme_shows_exists():
    commands = readme_commands()
    assert len(commands) > 30, commands
    missing = []
    for command in commands:
        words = command.split()[1:]
        if words[:1] == ["…"]:  # "rubric-bot …": any command
            continue
        parser, rest = parser_of(list(words))
        if parser.prog == "rubric-bot" and words and words[0] != "--version":
            missing.append(f"{command}: no subcommand {words[0]!r}")
            continue
        options = {option for action in parser._actions for option in action.option_strings}
        flags = {m.group(1) for word in rest if (m := re.match(r"\[?(--[a-z][a-z-]*)", word))}
        missing += [f"{command}: no option {flag}" for flag in sorted(flags - options)]

    assert missing == []


def test_every_slash_command_the_readme_shows_exists():
    shown = set(re.findall(r"`/rubric ([a-z]+)", README))

    assert shown and shown <= {subcommand.name for subcommand in RUBRIC_SUBCOMMANDS}


def test_the_readme_says_how_the_postgresql_tests_behave_under_ci_and_how_to_start_a_server_anywhere():
    text = " ".join(section("Install and test").split())

    assert "`CI=true`" in text and "fail instead" in text
    assert "docker run" in text and "RUBRIC_BOT_TEST_PG=postgresql://" in text


def test_the_settings_table_says_the_bot_token_is_required_only_for_one_workspace():
    (row,) = [line for line in README.splitlines() if line.startswith("| `SLACK_BOT_TOKEN` |")]

    assert "required with one workspace" in row and "unset" in row and "SLACK_CLIENT_ID" in row


def test_group_dms_are_listed_as_not_supported_and_the_manifest_agrees():
    manifest = (ROOT / "bot" / "manifest.yml").read_text()

    assert "mpim:history" not in manifest and "message.mpim" not in manifest
    assert "Group DMs" in README and "not supported" in " ".join(README.split())
