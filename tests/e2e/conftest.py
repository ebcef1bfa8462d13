"""End-to-end fixtures: the Slack and model stand-ins, and the real bot process in HTTP mode.

``slack_api`` and ``model_api`` are started per test. ``bot`` starts ``python -m bot serve --http`` wired
to both stand-ins with a fresh SQLite file; ``start_bot(env=..., command=...)`` starts more, or with
changed settings. Every process a test starts is stopped at teardown. ``shared_bot`` is the same for a
module-scoped fixture: stand-ins and one bot shared by a module's tests.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from typing import IO, Self

import pytest

from tests.standins import free_port
from tests.standins.model_api import ModelApiStandin
from tests.standins.slack_api import SlackApiStandin
from tests.standins.slack_requests import SlackSender

BOT_TOKEN = "xoxb-test-token"
"""The bot token the bot is given; the Slack stand-in refuses calls made with any other."""
SIGNING_SECRET = "e2e-signing-secret"
"""The signing secret shared by the bot and the test's SlackSender."""
BOT_COMMAND = (sys.executable, "-m", "bot", "serve", "--http", "--port", "{port}")
"""How the bot is started; ``{port}`` is replaced by a free port."""
BOT_START_TIMEOUT = 30.0
"""Seconds the bot may take to be ready (imports of langchain and friends are slow)."""
READY_PROBE_TIMEOUT = 5.0
"""Seconds one readiness probe waits for its answer."""
BOT_STOP_TIMEOUT = 15.0
"""Seconds the bot gets to exit after a signal before it is killed."""
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

EnvOverrides = Mapping[str, str | None]


class BotProcess:
    """The bot running as a subprocess, with its output collected in a log file."""

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str],
        log_path: Path,
        cwd: Path,
        ready: Callable[[], bool] | None = None,
    ) -> None:
        self.port = free_port()
        # A bot in Socket Mode opens no Slack port: its readiness is its websocket connection instead.
        self._ready = ready or partial(answers_ready, self.port)
        self.env = dict(env)
        self.log_path = log_path
        self.sender = SlackSender(self.url, SIGNING_SECRET)
        self._command = [part.format(port=self.port) for part in command]
        self._cwd = cwd
        self._process: subprocess.Popen[bytes] | None = None
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
        """The port of /healthz, /readyz and /metrics in Socket Mode and in `worker`."""
        return int(self.env["RUBRIC_BOT_METRICS_PORT"])

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


def answers_ready(port: int) -> bool:
    """Whether the bot answers 200 on ``/readyz`` at `port` (as an orchestrator's readiness probe asks)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=READY_PROBE_TIMEOUT) as answer:
            return bool(answer.status == 200)
    except OSError:  # not listening yet, or 503 (HTTPError is an OSError)
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
        # Socket Mode and worker processes serve /metrics on a port of their own: never a shared one.
        RUBRIC_BOT_METRICS_PORT=str(free_port()),
        NO_PROXY="127.0.0.1,localhost",
        PYTHONUNBUFFERED="1",
    )
    return env


@contextmanager
def shared_bot(
    workdir: Path, env: Mapping[str, str] | None = None
) -> Iterator[tuple[SlackApiStandin, ModelApiStandin, BotProcess]]:
    """Both stand-ins and one running bot (database ``workdir/bot.sqlite``, settings changed by `env`),
    stopped on exit; for a module's shared fixture."""
    with SlackApiStandin(token=BOT_TOKEN) as slack, ModelApiStandin() as model:
        settings = bot_environment(slack, model, workdir / "bot.sqlite") | dict(env or {})
        process = BotProcess(BOT_COMMAND, settings, workdir / "bot.log", workdir)
        process.start()
        try:
            yield slack, model, process
        finally:
            process.stop()
            process.sender.close()


@pytest.fixture
def slack_api() -> Iterator[SlackApiStandin]:
    with SlackApiStandin(token=BOT_TOKEN) as api:
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
    ``wait=False`` returns at once (then call the process's `wait_until_ready`).

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
    ) -> BotProcess:
        settings = bot_environment(slack_api, model_api, tmp_path / "bot.sqlite")
        for key, value in (env or {}).items():
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        process = BotProcess(command, settings, tmp_path / f"bot-{len(started) + 1}.log", tmp_path, ready)
        started.append(process)
        return process.start() if wait else process.launch()

    yield start
    for process in started:
        process.stop()
        process.sender.close()


@pytest.fixture
def bot(start_bot: Callable[..., BotProcess]) -> BotProcess:
    """The real bot, running in HTTP mode against the stand-ins."""
    return start_bot()
