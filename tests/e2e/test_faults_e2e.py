"""Faults, end to end on PostgreSQL with two `rubric-bot serve` replicas: the database restarted
under load, the database down while events arrive (with Slack's retries), and Slack answering 503
for as long as the test says. Every thread gets its answer, each message once.

The database is a PostgreSQL cluster of the module's own (`initdb` and `pg_ctl` from the server's
binaries, on a port of its own), so that stopping it disturbs nothing else on the machine.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest

from bot.rendering.rubrics import MODAL_BLOCK_ID, MODAL_CALLBACK_ID, MODAL_INPUT_ACTION_ID
from bot.slack.payloads import RubricEditorMetadata
from tests.e2e.conftest import (
    BOT_TOKEN,
    CRITERIA,
    RUBRIC,
    BotProcess,
    Service,
    button_value,
    evaluations,
    finals,
    run_messages,
)
from tests.standins import free_port, wait_for
from tests.standins import slack_requests as sr
from tests.standins.model_api import scripted_revision
from tests.standins.slack_api import SlackApiStandin

APP_TOKEN = "xapp-1-A1-faults-test"
"""The app-level token of the bot in Socket Mode."""
SOCKET_MODE_COMMAND = (sys.executable, "-m", "bot", "serve")
"""`serve` without ``--http``: with an app token, Socket Mode."""

pytestmark = pytest.mark.postgres

RUN_TIMEOUT = 90.0
"""Bound for every thread to be answered after a fault ends (resumes and Slack retries included)."""
DB_TIMEOUT = 60.0
"""Bound for the test's own PostgreSQL cluster to start or stop."""
REFUSED = "Slack refused a message for thread"
"""What a bot logs, once per run, when Slack first refuses one of the run's messages."""
REQUESTS = 6
"""Conversations in flight when a fault hits."""


@dataclass
class Cluster:
    """A PostgreSQL cluster of the test's own: stop and start it at will."""

    bin_dir: Path
    data: Path
    port: int
    as_postgres: tuple[str, ...]

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/bot"

    def ctl(self, *args: str) -> None:
        command = [*self.as_postgres, str(self.bin_dir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "60"]
        subprocess.run([*command, *args], check=True, capture_output=True, timeout=DB_TIMEOUT)

    def start(self) -> None:
        # PostgreSQL 15 reports itself stopped only once the children answering connections made
        # during the stop have exited, each waiting for its startup packet up to
        # authentication_timeout (60 s by default): twice a `stop` under load outlasted its 60 s,
        # its log showing the shutdown checkpoint done and "shut down" exactly 60 s later.
        options = (
            f"-p {self.port} -k {self.data} -c listen_addresses=127.0.0.1 -c fsync=off"
            " -c authentication_timeout=5s"
        )
        self.ctl("-o", options, "-l", str(self.data / "server.log"), "start")

    def stop(self) -> None:
        self.ctl("-m", "fast", "stop")


def _server_bin_dir() -> Path | None:
    found = shutil.which("initdb")
    candidates = [Path(found).parent] if found else []
    candidates += [Path(path) for path in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)]
    return next((path for path in candidates if (path / "initdb").exists()), None)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    bin_dir = _server_bin_dir()
    if bin_dir is None:
        pytest.fail("these tests need PostgreSQL's server binaries (initdb, pg_ctl)", pytrace=False)
    # PostgreSQL refuses to run as root: as root, the cluster belongs to the postgres account.
    as_postgres: tuple[str, ...] = ("runuser", "-u", "postgres", "--") if os.geteuid() == 0 else ()
    data = Path(tempfile.mkdtemp(prefix="rubric-bot-faults-pg-"))
    if as_postgres:
        shutil.chown(data, "postgres")
    subprocess.run(
        [
            *as_postgres,
            str(bin_dir / "initdb"),
            "-D",
            str(data),
            "-A",
            "trust",
            "-U",
            "postgres",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=DB_TIMEOUT,
    )
    own = Cluster(bin_dir, data, free_port(), as_postgres)
    own.start()
    try:
        yield own
    finally:
        own.stop()
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture
def slack_api() -> Iterator[SlackApiStandin]:
    """The Slack stand-in, knowing the app token too (for the bot in Socket Mode)."""
    with SlackApiStandin(token=BOT_TOKEN, app_token=APP_TOKEN) as api:
        yield api


def fresh_database(cluster: Cluster) -> None:
    with psycopg.connect(cluster.url.replace("/bot", "/postgres"), autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS bot WITH (FORCE)")
        admin.execute("CREATE DATABASE bot")


def start_pair(cluster: Cluster, start_bot, slack_api, model_api, **env: str) -> Service:
    """Two replicas on a fresh database of the cluster, settings changed by `env`."""
    fresh_database(cluster)
    settings = {"RUBRIC_BOT_DB": cluster.url, "RUBRIC_BOT_SHUTDOWN_GRACE": "0.5", **env}
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    return Service(slack_api, model_api, start_bot(env=settings), (start_bot(env=settings),))


@pytest.fixture
def pair(cluster, start_bot, slack_api, model_api) -> Service:
    # No process dies here: a stall time well beyond the outages keeps a live worker whose heartbeat
    # missed the restart from being taken for dead (its runs would then be taken over).
    return start_pair(cluster, start_bot, slack_api, model_api, RUBRIC_BOT_STALLED_AFTER="30")


def wait_answered(pair: Service, channel: str, roots: list[str]) -> None:
    """Wait until each thread holds its closing message (or fail, showing what is there)."""
    for root in roots:

        def described(root: str = root) -> str:
            texts = "\n---\n".join(m.all_text for m in pair.thread(channel, root))
            logs = "\n".join(bot.stderr_text()[-3000:] for bot in pair.bots)
            return f"an answer in thread {channel}/{root}; it holds:\n{texts}\nbot logs:\n{logs}"

        wait_for(lambda root=root: finals(pair.thread(channel, root)), RUN_TIMEOUT, message=described)


def assert_answered_once_each(pair: Service, channel: str, roots: list[str]) -> None:
    """Each thread: two evaluations and one closing message with the revised answer, each once."""
    for root in roots:
        thread = pair.thread(channel, root)
        # Once each, in either layout: a stream Slack refused in the outage falls back to messages.
        assert sorted(str(m.event_type) for m in thread) == sorted(run_messages(2)), [
            m.all_text for m in thread
        ]
        assert "failed" not in finals(thread)[0].all_text


def log_of(bot: BotProcess) -> str:
    return bot.stderr_text()


def retried_by_slack(bot: BotProcess, payload: dict[str, Any]) -> list[sr.SlackResponse]:
    """Deliver a refused event again as Slack does, up to its 3 retries, until one is taken; the answers."""
    answers = []
    for retry in (1, 2, 3):
        answers.append(bot.sender.send(payload, retry_num=retry))
        if answers[-1].status == 200:
            break
    return answers


def no_listener_traceback(logs: str) -> bool:
    """Whether no request's handling left a traceback: neither the bot's error handler's (``handling
    … failed``) nor Bolt's own. (The job queue's library logs its lost connections with theirs.)"""
    return "handling" not in logs and "Failed to run" not in logs and "bot/listeners/" not in logs


def test_a_database_restart_under_load_leaves_every_thread_with_its_answer(pair, cluster):
    pair.set_channel_rubric("C1", via=0)
    pair.model.latency = 0.3  # runs are mid-flight (checkpointing) when the database goes away
    roots = [pair.mention(f"Question {number}", "C1", via=number % 2) for number in range(REQUESTS)]
    wait_for(
        lambda: len(pair.model.requests("worker")) >= REQUESTS // 2, RUN_TIMEOUT, message="runs under way"
    )

    cluster.stop()
    cluster.start()

    wait_answered(pair, "C1", roots)
    assert_answered_once_each(pair, "C1", roots)
    assert not any("The model failed" in m.all_text for m in pair.slack.messages("C1"))
    logs = log_of(pair.bots[0]) + log_of(pair.bots[1])
    assert "the database failed" in logs  # the restart did cut runs short: they resumed


def test_events_sent_while_the_database_is_down_are_answered_once_each_after_it_is_back(pair, cluster):
    pair.set_channel_rubric("C2", via=0)
    cluster.stop()
    deliveries = []
    for number in range(3):
        ts = sr.new_ts()
        deliveries += [
            sr.event_callback(sr.app_mention(f"Question {number}", "C2", ts)),
            sr.event_callback(sr.message(f"<@UBOT> Question {number}", "C2", ts)),
        ]
    refused = [pair.bots[n % 2].sender.send(d) for n, d in enumerate(deliveries)]
    # Slack retries each delivery it got no 2xx for (here at once, to the other replica).
    retried = [pair.bots[(n + 1) % 2].sender.send(d, retry_num=1) for n, d in enumerate(deliveries)]

    assert {response.status for response in refused + retried} == {503}
    cluster.start()
    accepted = [pair.bots[n % 2].sender.send(d, retry_num=2) for n, d in enumerate(deliveries)]

    assert {response.status for response in accepted} == {200}
    roots = [delivery["event"]["ts"] for delivery in deliveries[::2]]
    wait_answered(pair, "C2", roots)
    assert_answered_once_each(pair, "C2", roots)
    logs = log_of(pair.bots[0]) + log_of(pair.bots[1])
    assert logs.count("could not take event") == len(refused + retried)  # one line each
    assert "handling event" not in logs  # and no traceback of a listener


def test_answers_slack_refuses_with_503_are_delivered_once_each_after_it_recovers(pair):
    # Each replica asks Slack who it is on its first request (Bolt's auth.test): before the outage.
    pair.set_channel_rubric("C3", via=0)
    pair.set_channel_rubric("C3", via=1)
    pair.slack.begin_outage(503)
    roots = [pair.mention(f"Question {number}", "C3", via=number % 2) for number in range(REQUESTS // 2)]
    # Slack stays down until every run has been graded and has had a message refused.
    wait_for(
        lambda: (
            sum(log_of(bot).count("Slack refused a message for thread") for bot in pair.bots) >= len(roots)
        ),
        RUN_TIMEOUT,
        message="every run to have had a message refused",
    )
    wait_for(lambda: len(pair.model.requests("grader")) >= 2 * len(roots), RUN_TIMEOUT, message="runs graded")
    assert all(pair.thread("C3", root) == [] for root in roots)

    pair.slack.end_outage()

    wait_answered(pair, "C3", roots)
    assert_answered_once_each(pair, "C3", roots)
    assert not any(evaluations(pair.thread("C3", root)) == [] for root in roots)


TAKE_OVER_RUNS_SWITCH = "E2E_TAKE_OVER_RUNS"
"""How many times the take-over test below runs (default once, as CI runs it): issue 44 asks that it
end each thread once in 20 runs, ``E2E_TAKE_OVER_RUNS=20 python -m pytest tests/e2e/test_faults_e2e.py
-k taken_over``."""

TAKE_OVER_RUNS = int(os.environ.get(TAKE_OVER_RUNS_SWITCH, "1"))


@pytest.mark.parametrize("attempt", range(1, TAKE_OVER_RUNS + 1), ids=lambda n: f"run{n}")
def test_runs_taken_over_in_a_database_outage_longer_than_the_stall_time_answer_each_thread_once(
    attempt, cluster, start_bot, slack_api, model_api
):
    # A stall time shorter than the outage: every worker's heartbeat goes stale while the database is
    # down, so once it is back their runs are re-queued and taken over, while the processes that ran
    # them, only cut off, go on. A long shutdown grace lets those finish whatever they would do.
    pair = start_pair(
        cluster,
        start_bot,
        slack_api,
        model_api,
        RUBRIC_BOT_STALLED_AFTER="1",
        RUBRIC_BOT_SHUTDOWN_GRACE=str(RUN_TIMEOUT),
    )
    pair.set_channel_rubric("C4", via=0)
    pair.model.latency = 0.3
    roots = [delivered_mention(pair, f"Question {n}", "C4", via=n % 2) for n in range(REQUESTS)]
    wait_for(
        lambda: len(pair.model.requests("worker")) >= REQUESTS // 2, RUN_TIMEOUT, message="runs under way"
    )

    cluster.stop()
    wait_for(
        lambda: any("the database failed" in log_of(bot) for bot in pair.bots),
        RUN_TIMEOUT,
        message="runs cut short by the outage",
    )
    # No run may end before its take-over: the model answers nothing until the database shows one.
    pair.model.hold()
    cluster.start()
    wait_for(lambda: requeued_jobs(cluster) > 0, RUN_TIMEOUT, message="runs taken over after the outage")
    pair.model.release()
    wait_answered(pair, "C4", roots)
    # Every process ends what it was doing (a run it lost included) before it exits.
    for bot in pair.bots:
        bot.stop(timeout=RUN_TIMEOUT * 2)

    assert_ended_once_each(pair, "C4", roots)


def delivered_mention(pair: Service, text: str, channel: str, *, via: int) -> str:
    """A mention sent to bot `via` as Slack delivers it: again (up to its 3 retries) while the bot
    answers 503, as a claim the busy machine held past the database's bounded wait is answered."""
    ts = sr.new_ts()
    payload = sr.event_callback(sr.app_mention(text, channel, ts))
    if pair.bots[via].sender.send(payload).status != 200:
        assert retried_by_slack(pair.bots[via], payload)[-1].status == 200
    return ts


def assert_ended_once_each(pair: Service, channel: str, roots: list[str]) -> None:
    """Each thread: one closing message, and each iteration graded shown once. One iteration or two:
    a grader whose trust thresholds could not be read in the outage leaves its verdicts to people,
    which ends the run at its first iteration."""
    for root in roots:
        thread = pair.thread(channel, root)
        shown = [m.all_text for m in thread]
        assert len(finals(thread)) == 1, shown
        graded = [m.all_text for m in evaluations(thread)]
        assert len(graded) in (1, 2) and len(set(graded)) == len(graded), shown
        assert "failed" not in finals(thread)[0].all_text


def requeued_jobs(cluster: Cluster) -> int:
    """Jobs of the queue run again by another worker (procrastinate counts each re-queue as an
    attempt); 0 while the database does not answer yet."""
    try:
        with psycopg.connect(cluster.url, connect_timeout=2) as connection:
            row = connection.execute("SELECT count(*) FROM procrastinate_jobs WHERE attempts > 0").fetchone()
    except psycopg.OperationalError:
        return 0
    return row[0] if row else 0


def test_an_event_socket_mode_could_not_take_is_not_acked_and_its_redelivery_is_answered_once(
    cluster, start_bot, slack_api, model_api
):
    fresh_database(cluster)
    model_api.worker, model_api.grader = scripted_revision(CRITERIA)
    bot = start_bot(
        env={"RUBRIC_BOT_DB": cluster.url, "SLACK_APP_TOKEN": APP_TOKEN, "SLACK_SIGNING_SECRET": None},
        command=SOCKET_MODE_COMMAND,
        ready=slack_api.socket_connected,
    )
    answer = slack_api.wait_for_ack(
        slack_api.send_envelope("slash_commands", sr.slash_command(f"set {RUBRIC}", "C5"))
    )
    assert "Channel default rubric set" in answer.payload["text"]
    root = sr.new_ts()
    mention = sr.event_callback(sr.app_mention("Question 1", "C5", root))

    cluster.stop()
    unacked = slack_api.send_envelope("events_api", mention)
    wait_for(lambda: "could not take event app_mention" in log_of(bot), RUN_TIMEOUT, message="the refusal")
    cluster.start()
    # Slack sends an event again while it is not acked: now it is taken, and a later copy is a no-op.
    for attempt in (1, 2):
        slack_api.wait_for_ack(slack_api.send_envelope("events_api", mention, retry_attempt=attempt))
    # A follow-up in the thread runs after anything queued before it, twins included.
    follow_up = sr.event_callback(sr.app_mention("Question 2", "C5", sr.new_ts(), root))
    slack_api.wait_for_ack(slack_api.send_envelope("events_api", follow_up))
    wait_for(
        lambda: len(finals(slack_api.messages_in_thread("C5", root))) >= 2, RUN_TIMEOUT, message="answers"
    )

    assert slack_api.ack_of(unacked) is None
    thread = slack_api.messages_in_thread("C5", root)
    assert len(finals(thread)) == 2 and "Revised answer" in finals(thread)[0].all_text
    assert log_of(bot).count("could not take event app_mention") == 1
    assert no_listener_traceback(log_of(bot))


def test_commands_clicks_forms_and_an_uninstall_the_database_could_not_take_get_503_and_work_sent_again(
    pair, cluster
):
    root, evaluation = pair.graded_thread("C6")
    bot = pair.bots[0]
    command = sr.slash_command(f"set {RUBRIC}", "C6")
    click = sr.block_actions("review_agree", button_value(evaluation), "C6", evaluation.ts, root, "U7")
    form = sr.view_submission(
        MODAL_CALLBACK_ID,
        sr.text_input(MODAL_BLOCK_ID, MODAL_INPUT_ACTION_ID, "- Answers in French"),
        RubricEditorMetadata(channel="C7").model_dump_json(),
    )

    uninstall = sr.event_callback(sr.app_uninstalled())

    cluster.stop()
    refused = [bot.sender.send(request) for request in (command, click, form, uninstall)]
    cluster.start()

    assert [response.status for response in refused] == [503, 503, 503, 503]
    logs = log_of(bot)
    assert logs.count("could not take /rubric: the database is unavailable") == 1
    assert logs.count("could not take block_actions review_agree: the database is unavailable") == 1
    assert logs.count(f"could not take view_submission {MODAL_CALLBACK_ID}: the database") == 1
    assert logs.count("could not take event app_uninstalled: the database is unavailable") == 1
    assert no_listener_traceback(logs)
    # The person sends them again (Slack does not): each is done, once.
    assert "Channel default rubric set" in pair.send(command).json()["text"]
    pair.send(click)
    pair.wait_message(evaluation, "1 review · no disagreements")
    assert pair.send(form).body == ""  # the form closes: saved
    for channel in ("C6", "C7"):
        history = pair.send(sr.slash_command("history", channel)).json()["text"]
        assert history == "The last 1 versions of this channel's default rubric."
    assert "- Answers in French" in pair.send(sr.slash_command("show", "C7")).json()["text"]
    # Slack sends the uninstall again (up to 3 times: a pooled connection the restart broke may
    # refuse one more), and the workspace's data goes.
    assert [r.status for r in retried_by_slack(bot, uninstall)][-1] == 200
    assert "no default rubric" in pair.send(sr.slash_command("show", "C7")).json()["text"]
