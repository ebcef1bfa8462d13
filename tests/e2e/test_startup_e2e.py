"""Start-up as an operator meets it: what `serve`, `worker` and `db upgrade` say when the database
cannot be used (one line naming it, no password, exit 2), how `--wait-for-db` waits for it, the
start-up line, the names PostgreSQL shows for the bot's connections, and HTTP mode's token check.

The failures are real: a port nothing listens on, a wrong password, a database that does not exist
and a schema the bot's role may not create tables in, all on the test's PostgreSQL server.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from importlib.metadata import version
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from bot.db.database import SCHEMA_LOCK_KEY
from bot.ops.health import STARTING
from tests.e2e.conftest import (
    BOT_COMMAND,
    RUN_TIMEOUT,
    SCRUBBED_ENV_PREFIXES,
    answers_ready,
    bot_environment,
    get,
    shows_password,
)
from tests.standins import free_port, wait_for
from tests.standins import slack_requests as sr
from tests.standins.tcp_link import TcpLink, via_link

SERVE = ("serve", "--http", "--port", "{port}")
WORKER = ("worker",)
DB_UPGRADE = ("db", "upgrade")


def unusable(url: str, problem: str) -> str:
    """The test database's URL changed to show `problem`."""
    server = make_url(url)
    if problem == "unreachable":
        return server.set(port=free_port()).render_as_string(hide_password=False)
    if problem == "wrong_password":
        return server.set(password="not-the-password").render_as_string(hide_password=False)
    if problem == "missing":
        return server.set(database=f"{server.database}_missing").render_as_string(hide_password=False)
    # pg_catalog: a schema every role may read and no role but a superuser may create tables in.
    return server.update_query_dict({"options": "-csearch_path=pg_catalog"}).render_as_string(
        hide_password=False
    )


EXPECTED = {
    "unreachable": "Connection refused",
    "wrong_password": "password authentication failed",
    "missing": "does not exist",
    "no_privileges": "permission denied for schema pg_catalog (the bot's role must own the database, or have",
}
"""What the one line says for each problem (the server's own words, or the bot's hint)."""


def run(command: tuple[str, ...], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    arguments = [part.format(port=free_port()) for part in command]
    return subprocess.run(
        [sys.executable, "-m", "bot", *arguments],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.postgres
@pytest.mark.parametrize(
    ("command", "problem"),
    [
        (SERVE, "unreachable"),
        (SERVE, "wrong_password"),
        (SERVE, "missing"),
        (SERVE, "no_privileges"),
        (WORKER, "unreachable"),
        (DB_UPGRADE, "wrong_password"),
    ],
)
def test_a_database_that_cannot_be_used_is_one_line_naming_it_and_exit_2(
    slack_api, model_api, postgres_server, tmp_path, command, problem
):
    url = unusable(postgres_server, problem)
    env = bot_environment(slack_api, model_api, tmp_path / "unused.sqlite") | {"RUBRIC_BOT_DB": url}

    result = run(command, env, tmp_path)

    assert result.returncode == 2
    output = result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("rubric-bot:")]
    assert errors == [result.stderr.splitlines()[-1]]  # one line, the last word
    masked = make_url(url).render_as_string(hide_password=True)
    assert errors[0].startswith(f"rubric-bot: cannot use the database {masked}: ")
    assert EXPECTED[problem] in errors[0]
    assert not shows_password(output, postgres_server) and not shows_password(output, url)
    assert "Traceback" not in output


@pytest.fixture
def link(postgres_url) -> Iterator[TcpLink]:
    server = make_url(postgres_url)
    with TcpLink(server.host or "127.0.0.1", server.port or 5432) as tcp:
        yield tcp


@pytest.mark.postgres
def test_wait_for_db_says_so_once_per_attempt_until_the_database_answers(start_bot, postgres_url, link):
    link.cut()
    url = via_link(postgres_url, link)
    bot = start_bot(env={"RUBRIC_BOT_DB": url}, command=(*BOT_COMMAND, "--wait-for-db"), wait=False)
    wait_for(lambda: "(attempt 2)" in bot.stderr_text(), RUN_TIMEOUT, message="a second attempt")
    # Alive while it waits, and not ready: an orchestrator neither kills it nor sends it traffic.
    assert get(f"http://127.0.0.1:{bot.port}/healthz") == (200, "ok\n")
    assert get(f"http://127.0.0.1:{bot.port}/readyz") == (503, f"not ready: {STARTING}\n")
    # Slack is told to come back (it retries events), not that nothing is there.
    early = bot.sender.send(sr.event_callback(sr.app_mention("too early", "C1", sr.new_ts())))
    assert early.status == 503 and early.headers.get("Retry-After") == "5"

    link.restore()
    bot.wait_until_ready()

    masked = make_url(url).render_as_string(hide_password=True)
    attempts = [line for line in bot.stderr_text().splitlines() if "could not use the database" in line]
    assert len(attempts) >= 2 and "Traceback" not in bot.stderr_text()
    first = attempts[0].split(" ", 2)[2]  # without the timestamp
    assert first.startswith(f"WARNING bot.ops.startup: could not use the database {masked} (attempt 1): ")
    assert "Connection refused" in first and first.endswith("; retrying in 1s")
    assert not shows_password(bot.stderr_text(), postgres_url)


@pytest.mark.postgres
def test_the_start_up_line_and_the_connection_names_say_which_process_is_which(start_bot, postgres_url):
    serving = start_bot(env={"RUBRIC_BOT_DB": postgres_url})
    worker_port = free_port()
    worker = start_bot(
        env={"RUBRIC_BOT_DB": postgres_url, "RUBRIC_BOT_METRICS_PORT": str(worker_port)},
        command=(*BOT_COMMAND[:3], "worker", "--concurrency", "7"),
        ready=partial(answers_ready, worker_port),
    )

    masked = make_url(postgres_url).render_as_string(hide_password=True)
    release = version("rubric-bot")
    expected = {
        serving: f"INFO bot.ops.startup: rubric-bot {release} starting: HTTP mode on port {serving.port}, "
        f"database {masked}, up to 100 runs at once",
        worker: f"INFO bot.ops.startup: rubric-bot {release} starting: worker, database {masked}, "
        "up to 7 runs at once",
    }
    for process, line in expected.items():
        assert line in process.stderr_text()
    with psycopg.connect(postgres_server_of(postgres_url)) as connection:
        names = {row[0] for row in connection.execute("SELECT application_name FROM pg_stat_activity")}
    host = socket.gethostname()
    assert {f"rubric-bot serve ({host})", f"rubric-bot worker ({host})"} <= names


def postgres_server_of(url: str) -> str:
    """`url` without its schema option: a plain connection to the same server and database."""
    return make_url(url).difference_update_query(["options"]).render_as_string(hide_password=False)


def test_http_mode_checks_the_bot_token_at_start(slack_api, model_api, tmp_path):
    env = bot_environment(slack_api, model_api, tmp_path / "bot.sqlite") | {
        "SLACK_BOT_TOKEN": "xoxb-revoked-or-mistyped"
    }

    result = run(SERVE, env, tmp_path)

    assert result.returncode == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("rubric-bot:")]
    assert errors == [result.stderr.splitlines()[-1]]
    assert errors[0].startswith("rubric-bot: SLACK_BOT_TOKEN was refused by Slack (invalid_auth)")
    assert "xoxb-revoked-or-mistyped" not in result.stderr and "Traceback" not in result.stderr
    assert [call.ok for call in slack_api.calls("auth.test")] == [False]


@pytest.mark.postgres
def test_db_commands_name_their_connections_and_db_upgrade_says_what_it_applied(postgres_url, tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_ENV_PREFIXES)}
    with psycopg.connect(postgres_server_of(postgres_url), autocommit=True) as holder:
        # Held here, the schema lock keeps `db upgrade` waiting (and connected) while we look.
        holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK_KEY,))
        upgrading = subprocess.Popen(
            [sys.executable, "-m", "bot", "db", "upgrade", "--db", postgres_url],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        name = f"rubric-bot db upgrade ({socket.gethostname()})"

        def connected() -> bool:
            rows = holder.execute("SELECT application_name FROM pg_stat_activity").fetchall()
            return name in {row[0] for row in rows}

        try:
            wait_for(connected, RUN_TIMEOUT, message=f"a connection named {name!r}")
        finally:
            holder.execute("SELECT pg_advisory_unlock(%s)", (SCHEMA_LOCK_KEY,))
            out, err = upgrading.communicate(timeout=120)
    assert upgrading.returncode == 0, err
    masked = make_url(postgres_url).render_as_string(hide_password=True)
    assert out.startswith(f"{masked}: applied the bot's migrations 0001, ")
    assert out.rstrip().endswith("; the job queue's schema") and not shows_password(out + err, postgres_url)
