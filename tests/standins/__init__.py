"""Local stand-ins for Slack and the model providers, served over real HTTP on 127.0.0.1.

This module holds what every stand-in shares: an aiohttp application served from its own event loop
in a background thread (so the test thread, or a bot subprocess, can talk to it while it answers
many requests concurrently), and `wait_for`, because the bot works in the background and tests can
only observe its effects after the fact.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from types import TracebackType
from typing import Self, TypeVar

from aiohttp import web

T = TypeVar("T")

HOST = "127.0.0.1"
"""Stand-ins listen on loopback only: tests must never be reachable from (or reach) the network."""

STOP_TIMEOUT = 10.0
"""Seconds to wait for the server to come up or clean up; a hung handler must not hang the suite."""


class BackgroundServer:
    """An aiohttp application on a random free port, served by an event loop in a daemon thread.

    Subclasses implement `build_app`. Use as a context manager, or call `start()` / `stop()`.
    """

    def __init__(self) -> None:
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def build_app(self) -> web.Application:
        """Return the application to serve; called once, on the server's own loop."""
        raise NotImplementedError

    @property
    def url(self) -> str:
        """Base URL without a trailing slash, e.g. ``http://127.0.0.1:54321``."""
        return f"http://{HOST}:{self.port}"

    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        ready: Future[int] = Future()
        self._thread = threading.Thread(
            target=self._serve, args=(ready,), name=type(self).__name__, daemon=True
        )
        self._thread.start()
        self.port = ready.result(timeout=STOP_TIMEOUT)
        return self

    def stop(self) -> None:
        loop, thread, runner = self._loop, self._thread, self._runner
        if loop is None or thread is None:
            return
        if runner is not None:
            asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=STOP_TIMEOUT)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=STOP_TIMEOUT)
        self._loop = self._thread = self._runner = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def _serve(self, ready: Future[int]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            port = loop.run_until_complete(self._open())
        except BaseException as exc:  # the starting thread must see why the server did not come up
            ready.set_exception(exc)
            loop.close()
            return
        ready.set_result(port)
        try:
            loop.run_forever()
        finally:
            loop.close()

    async def _open(self) -> int:
        # Binding the socket ourselves gives the port without reaching into aiohttp's internals.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        self._runner = web.AppRunner(self.build_app(), access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, backlog=1024).start()
        return int(sock.getsockname()[1])


def free_port() -> int:
    """A TCP port on loopback that nothing listens on at the moment."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def wait_for(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    *,
    interval: float = 0.02,
    message: str | Callable[[], str] = "condition",
) -> T:
    """Poll `predicate` until it returns something truthy, and return that value.

    Raises AssertionError naming `message` (a string, or a callable evaluated at failure time so it
    can describe the state seen) when `timeout` seconds pass first.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            described = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:g}s waiting for {described}")
        time.sleep(interval)
