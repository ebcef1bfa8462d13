"""A TCP link between the bot and its PostgreSQL server that a test can cut, as a failed network or a
stopped server would: while it is cut, open connections are closed and new ones are refused. Or
hold, as a network partition does: no byte passes, and nothing is closed or refused.

The bot is pointed at the link's port instead of the server's (`via_link` rewrites a database URL);
everything else is the real server, so the bot sees exactly what a database outage looks like from
its side, and other tests sharing the server are not disturbed.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import Future
from types import TracebackType
from typing import Self

from sqlalchemy.engine import make_url

from tests.standins import HOST, STOP_TIMEOUT, free_port

RELAY_CHUNK = 65536
"""Bytes relayed per read in either direction."""


class TcpLink:
    """Relays connections on `port` to `target_host:target_port`, in a background thread's event loop."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.port = free_port()
        self._target = (target_host, target_port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="TcpLink", daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._passing = asyncio.Event()
        """Set while bytes pass; cleared by `hold`."""
        self._passing.set()

    def start(self) -> Self:
        self._thread.start()
        self.restore()
        return self

    def cut(self) -> None:
        """Stop listening and close every relayed connection (both ends)."""
        self._call(self._cut())

    def restore(self) -> None:
        """Listen on the same port again."""
        self._call(self._listen())

    def hold(self) -> None:
        """Pass no more bytes either way, keeping every connection open and taking new ones: a
        dropped route (no reset, no refusal), where a database client waits for an answer that
        does not come."""
        self._loop.call_soon_threadsafe(self._passing.clear)

    def release(self) -> None:
        """Pass bytes again, those held first."""
        self._loop.call_soon_threadsafe(self._passing.set)

    def stop(self) -> None:
        self.cut()
        self._call(self._finish_relays())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=STOP_TIMEOUT)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def _call(self, coroutine: object) -> None:
        done: Future[None] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)  # type: ignore[arg-type]
        done.result(timeout=STOP_TIMEOUT)

    async def _listen(self) -> None:
        self._server = await asyncio.start_server(self._relay, HOST, self.port, reuse_address=True)

    async def _cut(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        self._writers.clear()

    async def _finish_relays(self) -> None:
        """Let the relays of the connections `cut` closed end before the loop stops."""
        relays = asyncio.all_tasks() - {asyncio.current_task()}
        for relay in relays:
            relay.cancel()
        await asyncio.gather(*relays, return_exceptions=True)

    async def _relay(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        try:
            server_reader, server_writer = await asyncio.open_connection(*self._target)
        except OSError:
            client_writer.close()
            return
        self._writers |= {client_writer, server_writer}
        await asyncio.gather(
            _pump(client_reader, server_writer, self._passing),
            _pump(server_reader, client_writer, self._passing),
            return_exceptions=True,
        )
        for writer in (client_writer, server_writer):
            writer.close()
            self._writers.discard(writer)


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, passing: asyncio.Event) -> None:
    try:
        while chunk := await reader.read(RELAY_CHUNK):
            await passing.wait()
            writer.write(chunk)
            await writer.drain()
    finally:
        writer.close()


def via_link(url: str, link: TcpLink) -> str:
    """The database `url` (postgresql://…), reached through `link` instead of directly."""
    return make_url(url).set(host=HOST, port=link.port).render_as_string(hide_password=False)
