"""End-to-end fixtures: the Slack and model stand-ins, and the real bot process in HTTP mode.

``slack_api`` and ``model_api`` are started per test. ``bot`` starts ``python -m bot serve --http`` wired
to both stand-ins with a fresh SQLite file (forked from the imported bot: see bot_fork);
``start_bot(env=..., command=...)`` starts more, or with changed settings. Every process a test starts
is stopped at teardown, and every post the bots made is checked not to unfurl its links.
``shared_bot`` is the same for a module-scoped fixture: stand-ins and one bot
shared by a module's tests.

What the e2e modules share lives here too (they never import each other): the rubric they grade
with, ``Service`` (bots, stand-ins and the Slack user's moves: mention, click, review form, waits
for the thread), and helpers that read the bot's messages, forms and ephemeral answers.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import IO, Any, Self

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy.engine import make_url

from tests.e2e.bot_fork import ForkedBot, forkable
from tests.standins import free_port, wait_for
from tests.standins import slack_requests as sr
from tests.standins.model_api import ChatRequest, ModelApiStandin, scripted_revision
from tests.standins.slack_api import SlackApiStandin, SlackCall, SlackMessage
from tests.standins.slack_requests import SlackSender
from tests.standins.triggers import PATIENT_TRIGGER_EXPIRY_SECONDS

BOT_TOKEN = "xoxb-test-token"
"""The bot token the bot is given; the Slack stand-in refuses calls made with any other."""
SIGNING_SECRET = "e2e-signing-secret"
"""The signing secret shared by the bot and the test's SlackSender."""
BOT_COMMAND = (sys.executable, "-m", "bot", "serve", "--http", "--port", "{port}")
"""How the bot is started; ``{port}`` is replaced by a free port."""
BOT_START_TIMEOUT = 120.0
"""Seconds the bot may take to be ready: a bound on an event, not a clock window. Imports of langchain
and friends take seconds, and many more on a busy 2-core CI machine running other bots."""
READY_PROBE_TIMEOUT = 5.0
"""Seconds one readiness probe (or any other GET a test makes of the bot) waits for its answer."""
BOT_STOP_TIMEOUT = 15.0
"""Seconds the bot gets to exit after a signal before it is killed."""
SHUTDOWN_GRACE = 1.0
"""Seconds a test's bot lets its runs finish when it is stopped (RUBRIC_BOT_SHUTDOWN_GRACE)."""
SCRUBBED_ENV_PREFIXES = (
    "SLACK_",
    "OPENAI_",
    "RUBRIC_BOT_",
    "ANTHROPIC_",
    "GOOGLE_",
    "LANGSMITH_",
    "LANGCHAIN_",
)
"""Settings inherited from the developer's shell that could point the bot at real services (or turn on
tracing, which uploads to the internet); they are removed before the test's own are set."""

STREAMING_SWITCH = "E2E_STREAMING"
"""Set to ``off`` to run a suite with the bots' streaming off (``RUBRIC_BOT_STREAMING``); on by default,
as in the product: ``E2E_STREAMING=off python -m pytest tests/e2e/…`` runs a suite the other way."""

STREAMING = os.environ.get(STREAMING_SWITCH, "on") != "off"
"""Whether this suite's bots stream their runs."""

FORK_SWITCH = "E2E_FORK"
"""Set to ``off`` to start every bot as a new interpreter (``python -m bot …``) instead of forking
the imported bot (see bot_fork): slower, for telling a fork's side effect from the bot's own."""

FORKING = os.environ.get(FORK_SWITCH, "on") != "off"
"""Whether bots are forked from the imported bot."""

EnvOverrides = Mapping[str, str | None]

METRICS_PORT = "RUBRIC_BOT_METRICS_PORT"
"""The setting of a process's port for /healthz, /readyz and /metrics: a free one per `BotProcess`
unless its env names one."""


class BotProcess:
    """The bot running as a subprocess, with its output collected in a log file."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path,
        ready: Callable[[], bool] | None = None,
        fork: bool = True,
    ) -> None:
        self.port = free_port()
        # A bot in Socket Mode opens no Slack port: its readiness is its websocket connection instead.
        self._ready = ready or partial(answers_ready, self.port)
        self.env = dict(env)
        # Every process serves /metrics on a port of its own: the processes of one env never share one.
        self.env.setdefault(METRICS_PORT, str(free_port()))
        self.log_path = log_path
        self.sender = SlackSender(self.url, SIGNING_SECRET)
        self._command = [part.format(port=self.port) for part in command]
        self._cwd = cwd
        # Forked from the imported bot (see bot_fork) unless the interpreter's own start is tested.
        self._argv = forkable(self._command) if fork and FORKING else None
        self._process: subprocess.Popen[bytes] | ForkedBot | None = None
        self._log: IO[bytes] | None = None
        self._runs = 0

    @property
    def url(self) -> str:
        """The bot's request URL for events, commands and interactivity."""
        return f"http://127.0.0.1:{self.port}/slack/events"

    @property
    def pid(self) -> int:
        """The running process's id (benchmarks read its CPU time from the OS)."""
        if self._process is None:
            raise RuntimeError("the bot has not been started")
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        """None while running (or never started); the exit code once it has stopped."""
        return None if self._process is None else self._process.poll()

    @property
    def metrics_port(self) -> int:
        """The port of /healthz, /readyz and /metrics (the only one /metrics is on)."""
        return int(self.env[METRICS_PORT])

    def start(self) -> Self:
        """Start the process and wait until it is ready (by default: `/readyz` answers 200 on its port)."""
        self.launch()
        self.wait_until_ready()
        return self

    def launch(self) -> Self:
        """Start the process without waiting for it (see `wait_until_ready`)."""
        if self.returncode is None and self._process is not None:
            raise RuntimeError("the bot is already running")
        self._runs += 1
        self._log = self.log_path.open("ab")
        self._log.write(f"----- bot start #{self._runs}: port {self.port} -----\n".encode())
        self._log.flush()
        if self._argv is not None:
            self._process = ForkedBot(self._argv, self.env, self._cwd, self.log_path)
        else:
            self._process = subprocess.Popen(
                self._command, env=self.env, cwd=self._cwd, stdout=self._log, stderr=subprocess.STDOUT
            )
        return self

    def stop(self, sig: int = signal.SIGTERM, timeout: float = BOT_STOP_TIMEOUT) -> int | None:
        """Send `sig`, wait for the exit (killing the process after `timeout`), return the exit code."""
        process = self._process
        if process is not None and process.poll() is None:
            process.send_signal(sig)
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return self.returncode

    def restart(self) -> Self:
        """Stop (SIGTERM) and start again: same port, same database, same settings."""
        self.stop()
        return self.start()

    def stderr_text(self) -> str:
        """Everything the bot wrote to stdout and stderr so far, across restarts."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_until_ready(self, timeout: float = BOT_START_TIMEOUT) -> None:
        """Wait until the launched process is ready; RuntimeError (with its output) if it exits first
        or is not ready within `timeout` seconds (then it is killed)."""
        deadline = time.monotonic() + timeout
        while not self._ready():
            code = self.returncode
            if code is not None:
                raise RuntimeError(
                    f"the bot exited with code {code} before it was ready; its output:\n{self.stderr_text()}"
                )
            if time.monotonic() > deadline:
                self.stop(signal.SIGKILL)
                raise RuntimeError(
                    f"the bot was not ready within {timeout:g}s; its output:\n{self.stderr_text()}"
                )
            time.sleep(0.05)


def get(url: str) -> tuple[int, str]:
    """GET `url`: the HTTP status and the body's text (for error statuses too)."""
    try:
        with urllib.request.urlopen(url, timeout=READY_PROBE_TIMEOUT) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""What /metrics shows: each sample's value by its name and sorted labels."""


def metrics(bot: BotProcess) -> Samples:
    """Every sample the bot's /metrics (on its metrics port) shows."""
    status, text = get(f"http://127.0.0.1:{bot.metrics_port}/metrics")
    assert status == 200
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples[(name, tuple(sorted(labels.items())))]


def shows_password(text: str, url: str) -> bool:
    """Whether `text` shows the password of the database `url`, the way a URL or a connection
    string would (the configured password, whatever it is; a test database without one is a
    test set up wrong)."""
    password = make_url(url).password
    assert password, f"{make_url(url)!r} has no password to look for"
    return any(shown in text for shown in (f":{password}@", f"password={password}", f"'{password}'"))


def answers_ready(port: int) -> bool:
    """Whether the bot answers 200 on ``/readyz`` at `port` (as an orchestrator's readiness probe asks)."""
    try:
        return get(f"http://127.0.0.1:{port}/readyz")[0] == 200
    except OSError:  # not listening yet
        return False


def bot_environment(slack_api: SlackApiStandin, model_api: ModelApiStandin, db_path: Path) -> dict[str, str]:
    """The bot's environment: this process's, minus service settings, plus the stand-ins' addresses."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(SCRUBBED_ENV_PREFIXES)}
    env.update(
        SLACK_BOT_TOKEN=BOT_TOKEN,
        SLACK_SIGNING_SECRET=SIGNING_SECRET,
        SLACK_API_URL=slack_api.api_url,
        RUBRIC_BOT_MODEL="openai:gpt-4o-mini",
        OPENAI_BASE_URL=model_api.base_url,
        OPENAI_API_KEY="test",
        RUBRIC_BOT_DB=str(db_path),
        RUBRIC_BOT_MAX_ITERATIONS="3",
        RUBRIC_BOT_STREAMING=os.environ.get(STREAMING_SWITCH, "on"),
        # A run still going when a test stops its bot is cut short (and queued again) after this,
        # not after the product's 25 s: the tests of the grace itself set their own.
        RUBRIC_BOT_SHUTDOWN_GRACE=str(SHUTDOWN_GRACE),
        # Slack's refusals retried within a tenth of a second, not seconds: what the bot does once
        # the client's retries are used up is what the tests check.
        RUBRIC_BOT_SLACK_RETRY_BACKOFF="0.01",
        # A few PostgreSQL connections for the tables, not the product's 10 opened at start: the
        # bots of both test workers share one server and its default 100 connections.
        RUBRIC_BOT_DB_POOL_SIZE="3",
        NO_PROXY="127.0.0.1,localhost",
        PYTHONUNBUFFERED="1",
    )
    return env


def slack_standin() -> SlackApiStandin:
    """The Slack stand-in for bot processes: it takes only the bot token, and trigger ids stay good
    for longer than Slack's three seconds, which a busy machine holding the bot up could miss."""
    return SlackApiStandin(token=BOT_TOKEN, trigger_expiry=PATIENT_TRIGGER_EXPIRY_SECONDS)


@contextmanager
def shared_bot(
    workdir: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[SlackApiStandin, ModelApiStandin, BotProcess]]:
    """Both stand-ins and one running bot (database ``workdir/bot.sqlite``, settings changed by `env`),
    stopped on exit; for a module's shared fixture."""
    with slack_standin() as slack, ModelApiStandin() as model:
        settings = bot_environment(slack, model, workdir / "bot.sqlite") | dict(env or {})
        process = BotProcess(BOT_COMMAND, settings, workdir / "bot.log", workdir)
        process.start()
        try:
            yield slack, model, process
        finally:
            process.stop()
            process.sender.close()
        assert_nothing_unfurled(slack)


@pytest.fixture
def slack_api() -> Iterator[SlackApiStandin]:
    with slack_standin() as api:
        yield api


@pytest.fixture
def model_api() -> Iterator[ModelApiStandin]:
    with ModelApiStandin() as api:
        yield api


@pytest.fixture
def start_bot(
    slack_api: SlackApiStandin, model_api: ModelApiStandin, tmp_path: Path
) -> Iterator[Callable[..., BotProcess]]:
    """A factory: ``start_bot(env={"RUBRIC_BOT_MAX_ITERATIONS": "2"})``; a None value unsets a variable;
    ``wait=False`` returns at once (then call the process's `wait_until_ready`); ``fork=False`` starts
    a new interpreter (``python -m bot …``) instead of forking the imported bot (see bot_fork).

    Every bot shares the test's database (``tmp_path/bot.sqlite``) and runs in `tmp_path`, so no
    ``.env`` from the developer's checkout is read.
    """
    started: list[BotProcess] = []

    def start(
        *,
        env: EnvOverrides | None = None,
        command: Sequence[str] = BOT_COMMAND,
        ready: Callable[[], bool] | None = None,
        wait: bool = True,
        fork: bool = True,
    ) -> BotProcess:
        settings = bot_environment(slack_api, model_api, tmp_path / "bot.sqlite")
        for key, value in (env or {}).items():
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        log_path = tmp_path / f"bot-{len(started) + 1}.log"
        process = BotProcess(command, settings, log_path, tmp_path, ready, fork=fork)
        started.append(process)
        return process.start() if wait else process.launch()

    yield start
    for process in started:
        process.stop()
        process.sender.close()
    assert_nothing_unfurled(slack_api)


def assert_nothing_unfurled(slack: SlackApiStandin) -> None:
    """Every post the bots made asked Slack not to preview its links and media (``NO_UNFURLS``):
    checked after every test that started a bot, whatever it posted."""
    unfurling = [
        (call.args.get("channel"), call.args.get("text", "")[:80]) for call in slack.unfurling_posts()
    ]
    assert not unfurling, f"posts that would unfurl their links: {unfurling}"


@pytest.fixture
def bot(start_bot: Callable[..., BotProcess]) -> BotProcess:
    """The real bot, running in HTTP mode against the stand-ins."""
    return start_bot()


# -- what the e2e modules share: the rubric, the service and its helpers ------------------------------

CRITERIA = ["Cites a source", "Is polite"]
"""The criteria of RUBRIC, as the scripted grader names them."""
RUBRIC = "- Cites a source\n- Is polite"
"""The rubric the e2e tests set on threads and channels."""
RUN_TIMEOUT = 30.0
"""Bound for one run (a resumed one included) to show up; the stand-ins answer in milliseconds."""


@dataclass
class Service:
    """One or more bot processes on one database, with the Slack and model stand-ins they share.

    Requests go to ``bot`` unless ``via`` names another process (its index in ``bots``), as a
    load balancer spreads them.
    """

    slack: SlackApiStandin
    model: ModelApiStandin
    bot: BotProcess
    others: tuple[BotProcess, ...] = ()

    @property
    def bots(self) -> tuple[BotProcess, ...]:
        return (self.bot, *self.others)

    @property
    def db_path(self) -> Path:
        """The SQLite file of the bot's database."""
        return Path(self.bot.env["RUBRIC_BOT_DB"])

    def send(self, payload: dict[str, Any], *, via: int = 0, **options: Any) -> Any:
        response = self.bots[via].sender.send(payload, **options)
        assert response.status == 200, (response.status, response.body)
        return response

    def mention(self, text: str, channel: str, thread_ts: str | None = None, *, via: int = 0) -> str:
        ts = sr.new_ts()
        self.send(sr.event_callback(sr.app_mention(text, channel, ts, thread_ts)), via=via)
        return ts

    def say(
        self, text: str, channel: str, thread_ts: str | None = None, *, via: int = 0, **fields: Any
    ) -> str:
        ts = sr.new_ts()
        self.send(sr.event_callback(sr.message(text, channel, ts, thread_ts, **fields)), via=via)
        return ts

    def set_channel_rubric(self, channel: str, *, via: int = 0) -> None:
        answer = self.send(sr.slash_command(f"set {RUBRIC}", channel), via=via).json()
        assert "Channel default rubric set" in answer["text"]

    def thread(self, channel: str, root: str) -> list[SlackMessage]:
        return self.slack.messages_in_thread(channel, root)

    def finals(self, channel: str, root: str) -> list[SlackMessage]:
        return finals(self.thread(channel, root))

    def wait_thread(
        self,
        channel: str,
        root: str,
        done: Callable[[list[SlackMessage]], bool],
        timeout: float = RUN_TIMEOUT,
    ) -> None:
        """Until `done` holds for the thread's messages (within `timeout` seconds); the thread and
        the bots' logs if it never does."""

        def described() -> str:
            texts = "\n---\n".join(m.all_text for m in self.thread(channel, root))
            logs = "\n".join(bot.stderr_text()[-3000:] for bot in self.bots)
            return f"the thread {channel}/{root} to be complete; it holds:\n{texts}\nbot logs:\n{logs}"

        wait_for(lambda: done(self.thread(channel, root)), timeout, message=described)

    def wait_finals(
        self, channel: str, root: str, count: int, timeout: float = RUN_TIMEOUT
    ) -> list[SlackMessage]:
        self.wait_thread(channel, root, lambda messages: len(finals(messages)) >= count, timeout)
        return self.finals(channel, root)

    def wait_text(self, channel: str, root: str, needle: str) -> SlackMessage:
        def found() -> SlackMessage | None:
            return next((m for m in self.thread(channel, root) if needle in m.all_text), None)

        return wait_for(found, RUN_TIMEOUT, message=lambda: f"{needle!r} in {channel}/{root}")

    def worker_requests_for(self, text: str) -> list[ChatRequest]:
        return [r for r in self.model.requests("worker") if text in r.all_text]

    # -- reviews

    def graded_thread(self, channel: str) -> tuple[str, SlackMessage]:
        """A thread with the rubric and one answered request; its root and first evaluation.

        The scripted grader fails "Cites a source" on the first iteration and passes "Is polite".
        """
        root = self.mention(f"rubric:\n{RUBRIC}", channel)
        self.wait_text(channel, root, "Rubric set")
        self.mention("Is coffee healthy?", channel, thread_ts=root)
        self.wait_finals(channel, root, 1)
        return root, evaluations(self.thread(channel, root))[0]

    def click(self, action_id: str, message: SlackMessage, root: str, user: str, **extra: Any) -> None:
        self.send(
            sr.block_actions(
                action_id, button_value(message), message.channel, message.ts, root, user, **extra
            )
        )

    def wait_message(self, message: SlackMessage, needle: str) -> SlackMessage:
        def found() -> SlackMessage | None:
            current = next(m for m in self.slack.messages(message.channel) if m.ts == message.ts)
            return current if needle in current.all_text else None

        return wait_for(found, RUN_TIMEOUT, message=lambda: f"{needle!r} on message {message.ts}")

    def open_form(self, message: SlackMessage, root: str, user: str) -> dict[str, Any]:
        trigger = sr.new_trigger_id()
        self.click("review_disagree", message, root, user, trigger_id=trigger)
        opened = wait_for(
            lambda: [c for c in self.slack.calls("views.open") if c.args.get("trigger_id") == trigger],
            RUN_TIMEOUT,
            message="views.open for the review form",
        )
        return opened[0].args["view"]

    def submit_form(self, view: dict[str, Any], values: dict[str, Any], user: str) -> Any:
        return self.send(sr.view_submission(view["callback_id"], values, view["private_metadata"], user))

    def disagree(
        self, message: SlackMessage, root: str, user: str, changes: dict[str, tuple[str, str]]
    ) -> None:
        """Open the form, change some verdicts (criterion → (verdict, comment)) and submit it."""
        view = self.open_form(message, root, user)
        assert self.submit_form(view, form_values(view, changes), user).body == ""

    def grader_requests_after(self, count: int) -> list[str]:
        return [r.all_text for r in self.model.requests("grader")[count:]]

    def stored_evaluations(self, channel: str) -> list[dict[str, Any]]:
        with closing(sqlite3.connect(self.db_path)) as db:
            rows = db.execute(
                "SELECT evaluation FROM evaluations WHERE channel = ? ORDER BY created_at", (channel,)
            ).fetchall()
        return [json.loads(row[0]) for row in rows]


@pytest.fixture
def launch(
    database_url: str,
    start_bot: Callable[..., BotProcess],
    slack_api: SlackApiStandin,
    model_api: ModelApiStandin,
) -> Callable[..., Service]:
    """Start a bot on the test's database (SQLite or PostgreSQL, one test each) with extra settings,
    its models scripted to revise once (`scripted_revision` of `CRITERIA`). The database is asked
    for first, so that it is torn down last: after the bots on it have stopped."""

    def start(**env: str) -> Service:
        model_api.worker, model_api.grader = scripted_revision(CRITERIA)
        return Service(slack_api, model_api, start_bot(env={"RUBRIC_BOT_DB": database_url, **env}))

    return start


@contextmanager
def shared_service(workdir: Path, env: Mapping[str, str] | None = None) -> Iterator[Service]:
    """`shared_bot` as a Service, with the default scripts: each first answer needs one revision."""
    with shared_bot(workdir, env) as (slack, model, process):
        model.worker, model.grader = scripted_revision(CRITERIA)
        yield Service(slack, model, process)


def finals(messages: list[SlackMessage]) -> list[SlackMessage]:
    return [m for m in messages if m.event_type == "rubric_final"]


def run_messages(iterations: int) -> list[str]:
    """The event types of a run's messages as its thread shows them, for a run of `iterations`:
    streamed, the answer ends the run's first message (the plan), above the iterations' own."""
    graded = ["rubric_evaluation"] * iterations
    return ["rubric_final", *graded] if STREAMING else [*graded, "rubric_final"]


def evaluations(messages: list[SlackMessage]) -> list[SlackMessage]:
    return [m for m in messages if m.event_type == "rubric_evaluation"]


def wait_until_working(slack: SlackApiStandin, channel: str, thread_ts: str) -> None:
    """Until the thread's status says the bot is drafting an answer."""
    wait_for(
        lambda: slack.thread_status(channel, thread_ts) == "is writing a draft…",
        RUN_TIMEOUT,
        message="the bot to start working",
    )


def button_value(message: SlackMessage) -> str:
    actions = next(b for b in message.blocks if b["type"] == "actions")
    return actions["elements"][0]["value"]


def form_inputs(view: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(criterion label, verdict block, comment block) for each criterion of a review form."""
    inputs = [b for b in view["blocks"] if b["type"] == "input"]
    for verdict, comment in zip(inputs[::2], inputs[1::2], strict=True):
        yield verdict["label"]["text"], verdict, comment


def form_values(view: dict[str, Any], changes: dict[str, tuple[str, str]]) -> dict[str, Any]:
    """The form's state as Slack submits it: the pre-set verdicts, with `changes` applied."""
    values: dict[str, Any] = {}
    for label, verdict, comment in form_inputs(view):
        # A criterion the grader could not tell has no pre-set verdict: the test must choose one.
        chosen, text = (
            changes[label] if label in changes else (verdict["element"]["initial_option"]["value"], None)
        )
        option = next(o for o in verdict["element"]["options"] if o["value"] == chosen)
        values[verdict["block_id"]] = {
            verdict["element"]["action_id"]: {"type": "static_select", "selected_option": option}
        }
        values.update(sr.text_input(comment["block_id"], comment["element"]["action_id"], text))
    return values


def ephemerals(slack: SlackApiStandin, channel: str) -> list[SlackCall]:
    return [c for c in slack.calls("chat.postEphemeral") if c.args.get("channel") == channel]


def proposal_messages(slack: SlackApiStandin, channel: str) -> list[SlackMessage]:
    """The proposed grading changes posted in the channel, oldest first (`bot.proposals`)."""
    return [
        m for m in slack.messages(channel) if m.thread_ts is None and "Proposed grading change" in m.all_text
    ]


def wait_proposal(s: Service, channel: str, count: int) -> SlackMessage:
    """The channel's `count`-th proposal, once its replay is posted."""
    return wait_for(
        lambda: (
            proposal_messages(s.slack, channel)[count - 1]
            if len(proposal_messages(s.slack, channel)) >= count
            else None
        ),
        RUN_TIMEOUT,
        message=lambda: f"proposal {count} in {channel}; bot log:\n{s.bot.stderr_text()[-3000:]}",
    )


def click_proposal(s: Service, message: SlackMessage, action: str, user: str) -> None:
    """Click Apply (``proposal_apply``) or Cancel (``proposal_cancel``) on a proposal's message, the
    message shown with the click as Slack sends it."""
    buttons = next(b for b in message.blocks if b["type"] == "actions")
    value = next(e["value"] for e in buttons["elements"] if e["action_id"] == action)
    payload = sr.block_actions(action, value, message.channel, message.ts, user=user)
    payload["message"] |= {"text": message.text, "blocks": message.blocks}
    s.send(payload)


def responses(slack: SlackApiStandin, name: str) -> list[SlackCall]:
    """Answers posted to the response_url named `name` (see SlackApiStandin.response_url)."""
    return [c for c in slack.calls("response_url") if c.args.get("name") == name]


def posted_report(s: Service, channel: str) -> str:
    """The text of the report `/rubric report` posts in the channel now (not of an earlier one)."""

    def reports() -> list[str]:
        return [
            m.all_text
            for m in s.slack.messages(channel)
            if m.thread_ts is None and "Grader agreement" in m.text
        ]

    before = len(reports())
    s.send(sr.slash_command("report", channel, response_url=s.slack.response_url(channel)))

    def posted() -> str | None:
        found = reports()
        return found[-1] if len(found) > before else None

    return wait_for(posted, RUN_TIMEOUT, message=lambda: f"the report in {channel}")
