"""Operating the bot: processes that start together, and what `/healthz`, `/readyz` and `/metrics` say.

What a process answers and counts runs on both backends. Processes starting together and the database
outage run on PostgreSQL, in a fresh schema per test (the bot's tables, the checkpointer's and the job
queue's all land in it). The outage is real from the bot's side: it reaches PostgreSQL through a TCP
link the test cuts (tests.standins.tcp_link), so open connections die and new ones are refused, while
other tests sharing the server go on undisturbed.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from functools import partial

import psycopg
import pytest
from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
from sqlalchemy.engine import make_url

from bot.db.admin import upgrade
from bot.db.database import Database
from bot.lifecycle.retention import CLAIMS_JOB, RETENTION_JOB
from bot.ops.health import DATABASE_UNREACHABLE
from bot.ops.metrics import RUN_STATUSES
from tests.e2e.conftest import (
    BOT_COMMAND,
    BOT_START_TIMEOUT,
    CRITERIA,
    RUBRIC,
    RUN_TIMEOUT,
    BotProcess,
    answers_ready,
    get,
    metrics,
    shows_password,
    value,
)
from tests.standins import free_port, wait_for
from tests.standins import slack_requests as sr
from tests.standins.model_api import scripted_revision
from tests.standins.slack_api import SlackApiStandin
from tests.standins.tcp_link import TcpLink, via_link

DAILY_JOBS = (RETENTION_JOB, CLAIMS_JOB)
"""The jobs every process schedules once a day, whatever the test does."""

OUTAGE_TIMEOUT = 30.0
"""Bound for /readyz to notice the database going away, or coming back."""
WORKER_COMMAND = (*BOT_COMMAND[:3], "worker")
"""`rubric-bot worker`, which serves /readyz on RUBRIC_BOT_METRICS_PORT."""


def ask(bot: BotProcess, channel: str, text: str) -> str:
    """Mention the bot in a new thread of `channel` with `text`; the thread's ts."""
    ts = sr.new_ts()
    response = bot.sender.send(sr.event_callback(sr.app_mention(text, channel, ts)))
    assert response.status == 200, (response.status, response.body)
    return ts


def wait_for_final(slack: SlackApiStandin, channel: str, root: str) -> None:
    def final() -> bool:
        return any(m.event_type == "rubric_final" for m in slack.messages_in_thread(channel, root))

    wait_for(final, RUN_TIMEOUT, message=f"the final answer in {channel}/{root}")


def set_channel_rubric(bot: BotProcess, channel: str) -> None:
    answer = bot.sender.send(sr.slash_command(f"set {RUBRIC}", channel)).json()
    assert "Channel default rubric set" in answer["text"]


# -- starting together ---------------------------------------------------------------------------


CHECKPOINT_INDEXES = {
    f"{table}_thread_id_idx" for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
}
"""The indexes the checkpointer's CREATE INDEX CONCURRENTLY migrations make."""


def put_checkpointer_a_version_behind(url: str) -> None:
    """Upgrade the database fully, then undo the checkpointer's index migrations (its CREATE INDEX
    CONCURRENTLY steps): a database a newer langgraph meets for the first time."""
    asyncio.run(upgrade(Database.parse(url)))
    concurrent = [v for v, sql in enumerate(AsyncPostgresSaver.MIGRATIONS) if "CONCURRENTLY" in sql]
    with psycopg.connect(url, autocommit=True) as connection:
        for index in sorted(CHECKPOINT_INDEXES):
            connection.execute(f"DROP INDEX {index}")
        connection.execute("DELETE FROM checkpoint_migrations WHERE v >= %s", (min(concurrent),))
    assert checkpointer_schema(url) == (set(), min(concurrent))


def checkpointer_schema(url: str) -> tuple[set[str], int]:
    """Which of `CHECKPOINT_INDEXES` the schema of `url` has (valid ones: a CREATE INDEX CONCURRENTLY
    cut short leaves an invalid one), and how many of its migrations the checkpointer has recorded."""
    with psycopg.connect(url) as connection:
        rows = connection.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE c.relnamespace = current_schema()::regnamespace AND i.indisvalid"
        ).fetchall()
        recorded = connection.execute("SELECT count(*) FROM checkpoint_migrations").fetchone()
    return CHECKPOINT_INDEXES & {row[0] for row in rows}, recorded[0] if recorded else 0


@pytest.mark.postgres
@pytest.mark.parametrize("schema", ["fresh", "checkpointer_a_version_behind"])
def test_two_serves_and_a_worker_started_together_all_become_ready(
    start_bot, slack_api, model_api, postgres_url, schema
):
    if schema == "checkpointer_a_version_behind":
        put_checkpointer_a_version_behind(postgres_url)
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    env = {"RUBRIC_BOT_DB": postgres_url}
    worker_port = free_port()
    processes = [
        start_bot(env=env, wait=False),
        start_bot(env=env, wait=False),
        start_bot(
            env={**env, "RUBRIC_BOT_METRICS_PORT": str(worker_port)},
            command=WORKER_COMMAND,
            ready=partial(answers_ready, worker_port),
            wait=False,
        ),
    ]

    # All three were started before any was ready; they share the CPU, so each has its own allowance.
    for process in processes:
        process.wait_until_ready(BOT_START_TIMEOUT * len(processes))
    set_channel_rubric(processes[0], "C1")
    root = ask(processes[1], "C1", "Is coffee healthy?")
    wait_for_final(slack_api, "C1", root)
    assert checkpointer_schema(postgres_url) == (CHECKPOINT_INDEXES, len(AsyncPostgresSaver.MIGRATIONS))


@pytest.mark.postgres
def test_two_db_upgrades_at_once_both_finish_and_one_applies_the_schema(postgres_url, tmp_path):
    command = [sys.executable, "-m", "bot", "db", "upgrade", "--db", postgres_url]
    upgrades = [subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=BOT_START_TIMEOUT * len(upgrades))[0] for process in upgrades]

    assert [process.returncode for process in upgrades] == [0, 0]
    applied = sorted(line.split(": ", 1)[1].split(" ")[0] for line in outputs)
    assert applied == ["applied", "up"]  # "applied the bot's migrations …", "up to date"


# -- health, readiness, metrics ------------------------------------------------------------------


@pytest.fixture
def link(postgres_url) -> Iterator[TcpLink]:
    """A link the test can cut between the bot and the test's PostgreSQL server."""
    server = make_url(postgres_url)
    with TcpLink(server.host or "127.0.0.1", server.port or 5432) as tcp:
        yield tcp


@pytest.mark.postgres
def test_readyz_follows_the_database_through_an_outage_naming_only_that_it_is_unreachable(
    start_bot, slack_api, model_api, postgres_url, link
):
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    bot = start_bot(env={"RUBRIC_BOT_DB": via_link(postgres_url, link)})
    base = f"http://127.0.0.1:{bot.port}"

    assert get(f"{base}/healthz") == (200, "ok\n")
    # Ready (start_bot waited for it); a probe the busy machine slows past /readyz's 1 s database
    # bound answers 503 once, which is what the bound is for, so the test waits for the 200 again.
    wait_for(
        lambda: get(f"{base}/readyz") == (200, "ready\n"), OUTAGE_TIMEOUT, message="/readyz to answer 200"
    )

    link.cut()
    wait_for(lambda: get(f"{base}/readyz")[0] == 503, OUTAGE_TIMEOUT, message="/readyz to answer 503")
    # Anyone who can reach the port sees one line naming no host, user or password; the log has why.
    assert get(f"{base}/readyz") == (503, f"not ready: {DATABASE_UNREACHABLE}\n")
    wait_for(
        lambda: "not ready: the database is unreachable: " in bot.stderr_text(),
        OUTAGE_TIMEOUT,
        message="the outage's detail in the log",
    )
    assert not shows_password(bot.stderr_text(), postgres_url)
    assert get(f"{base}/healthz")[0] == 200  # alive all the same

    link.restore()
    wait_for(lambda: get(f"{base}/readyz") == (200, "ready\n"), OUTAGE_TIMEOUT, message="/readyz back to 200")


def test_health_and_readiness_answer_and_metrics_count_a_run_its_grader_calls_tokens_and_slack_errors(
    launch, slack_api
):
    bot = launch().bot
    # The probes on Slack's public port (load balancers ask there) and on the metrics port alike.
    for port in (bot.port, bot.metrics_port):
        assert get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        # Ready, as start_bot waited for; one probe the busy machine slows past the 1 s database
        # bound would answer 503, so the 200 is waited for rather than asserted once.
        wait_for(partial(answers_ready, port), OUTAGE_TIMEOUT, message="/readyz 200")
    # /metrics only on the metrics port: the public port does not tell anyone what the bot does.
    assert get(f"http://127.0.0.1:{bot.port}/metrics")[0] == 404
    before = metrics(bot)
    assert {value(before, "rubric_bot_runs_total", status=s) for s in RUN_STATUSES} == {0.0}
    # No request is queued yet; the only jobs that may wait are the day's retention and claims sweeps,
    # which procrastinate defers at 03:17 UTC (and for ten minutes after) whenever the test runs then.
    assert value(before, "rubric_bot_queue_jobs", state="todo") <= len(DAILY_JOBS)

    set_channel_rubric(bot, "C2")
    slack_api.error_next("assistant.threads.setStatus", "missing_scope")  # one refused Slack call
    root = ask(bot, "C2", "Is coffee healthy?")
    wait_for_final(slack_api, "C2", root)
    # The run is counted as it ends, just after its final message is posted.
    counted = lambda: value(metrics(bot), "rubric_bot_runs_total", status="satisfied") == 1.0  # noqa: E731
    wait_for(counted, RUN_TIMEOUT, message="the run counted in /metrics")
    after = metrics(bot)

    assert value(after, "rubric_bot_runs_total", status="satisfied") == 1.0
    assert value(after, "rubric_bot_run_seconds_count") == 1.0
    assert value(after, "rubric_bot_grader_calls_total") == 2.0  # one revision: two iterations graded
    assert value(after, "rubric_bot_tokens_total", role="worker") > 0
    assert value(after, "rubric_bot_tokens_total", role="grader") > 0
    assert value(after, "rubric_bot_cost_usd_total", role="grader") > 0  # gpt-4o-mini has a list price
    assert value(after, "rubric_bot_unpriced_runs_total") == 0.0
    assert value(after, "rubric_bot_slack_errors_total") == 1.0
