"""The model stand-in in a process of its own, for benchmarks.

In the measuring process the stand-in would take CPU and the GIL from the code being measured and
inflate its figures; in its own process it only shares the machine's cores, like a remote API.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from multiprocessing.connection import Connection
from types import TracebackType
from typing import Any, Self

from tests.standins.model_api import ModelApiStandin, Script, fixed_grader, scripted_revision

STOP = "stop"
"""What the parent sends the stand-in's process to end it (it answers with its statistics)."""


def script_for(criteria: Sequence[str], answer: str, revisions: int) -> Script:
    """Each answer passes `criteria` at once, or (revisions=1) needs exactly one revision first."""
    if revisions:
        return scripted_revision(criteria)
    return Script(worker=lambda request: answer, grader=fixed_grader(criteria))


def _serve(connection: Connection, criteria: list[str], answer: str, revisions: int, latency: float) -> None:
    with ModelApiStandin() as api:
        api.worker, api.grader = script_for(criteria, answer, revisions)
        api.latency = latency
        connection.send(api.base_url)
        connection.recv()  # STOP
        connection.send(
            {
                "grader_requests": len(api.requests("grader")),
                "worker_requests": len(api.requests("worker")),
                "worker_prompt_tokens": [request.prompt_tokens for request in api.requests("worker")],
                "summary_requests": len(api.requests("summary")),
                "peak_concurrency": api.peak_concurrency,
                "handler_errors": api.handler_errors,
            }
        )


class ModelProcess:
    """`ModelApiStandin` answering after `latency` seconds, served by a child process."""

    def __init__(self, criteria: Sequence[str], answer: str, *, revisions: int = 0, latency: float) -> None:
        self._parent, child = multiprocessing.Pipe()
        # spawn, not fork: the parent has threads of its own (the Slack stand-in's server).
        context = multiprocessing.get_context("spawn")
        self._process = context.Process(
            target=_serve, args=(child, list(criteria), answer, revisions, latency), daemon=True
        )
        self.base_url = ""
        self.stats: dict[str, Any] = {}

    @property
    def pid(self) -> int | None:
        """The stand-in's process id (for measuring what it used)."""
        return self._process.pid

    def __enter__(self) -> Self:
        self._process.start()
        self.base_url = self._parent.recv()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._parent.send(STOP)
        self.stats = self._parent.recv()
        self._process.join(timeout=10)
