"""Bot processes forked from a server that imported the bot once, instead of a fresh interpreter each.

Importing the bot (langchain, langgraph, Bolt, procrastinate, SQLAlchemy…) takes seconds of CPU, and
the suite starts over a hundred bots: most of its time went to those imports, not to checking
anything. A `multiprocessing` forkserver imports ``bot.cli.main`` once per test worker and forks a
process for each bot, which runs ``main(argv)`` — what ``python -m bot …`` runs — in a process of its
own, with its own environment, working directory, signals, ports and exit code. Tests about the
interpreter's own start (the ``python -m bot`` command line itself) still start a subprocess.

This module imports nothing but the standard library: the forkserver unpickles `run_bot` by importing
it in every forked process.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

BOT_MODULE_COMMAND = (sys.executable, "-m", "bot")
"""The command prefix that runs the bot's CLI; a command starting with it can be forked instead."""

_FORKSERVER = multiprocessing.get_context("forkserver")
_FORKSERVER.set_forkserver_preload(["bot.cli.main"])


def run_bot(argv: list[str], env: dict[str, str], cwd: str, log_path: str) -> None:
    """In the forked process: become ``python -m bot *argv`` in `cwd` with exactly `env`, writing
    stdout and stderr to `log_path` (appended), and exit with the CLI's exit code."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    # As PYTHONUNBUFFERED does for a new interpreter: the log shows each line as it is written.
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)
    sys.argv = ["rubric-bot", *argv]
    from bot.cli.main import main

    sys.exit(main(argv))


class ForkedBot:
    """A forked bot, answering the part of `subprocess.Popen`'s interface `BotProcess` uses."""

    def __init__(self, argv: Sequence[str], env: Mapping[str, str], cwd: Path, log_path: Path) -> None:
        # Not a daemon: the bot starts processes of its own (it reads PDFs in a child).
        self._process = _FORKSERVER.Process(
            target=run_bot, args=(list(argv), dict(env), str(cwd), str(log_path)), daemon=False
        )
        self._process.start()

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    def poll(self) -> int | None:
        """None while running; the exit code (minus the signal's number if one ended it) once stopped."""
        return self._process.exitcode

    def send_signal(self, sig: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, sig)

    def kill(self) -> None:
        self._process.kill()

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        code = self._process.exitcode
        if code is None:
            raise subprocess.TimeoutExpired(BOT_MODULE_COMMAND, timeout or 0.0)
        return code


def forkable(command: Sequence[str]) -> list[str] | None:
    """The CLI arguments of `command` when it runs the bot's CLI (``python -m bot …``), else None."""
    prefix = len(BOT_MODULE_COMMAND)
    return list(command[prefix:]) if tuple(command[:prefix]) == BOT_MODULE_COMMAND else None
