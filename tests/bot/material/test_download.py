"""Downloading a shared file: the token is sent, and every way a download fails becomes a reason."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest
from aiohttp import web

from bot.material.files import SharedFile, UnreadableFile, download
from tests.standins import BackgroundServer

TOKEN = "xoxb-download"


class FileServer(BackgroundServer):
    """Serves /ok (only with the token), /login (Slack's sign-in page), /lying (more bytes than
    announced) and /stalled (never answers until the server stops)."""

    def build_app(self) -> web.Application:
        self.stop_stalling = asyncio.Event()
        app = web.Application()
        app.router.add_get("/ok", self._ok)
        app.router.add_get("/login", self._login)
        app.router.add_get("/lying", self._lying)
        app.router.add_get("/stalled", self._stalled)
        app.on_shutdown.append(self._release)
        return app

    async def _ok(self, request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=403)
        return web.Response(body=b"hello", content_type="text/plain")

    async def _login(self, request: web.Request) -> web.Response:
        return web.Response(text="<html>sign in</html>", content_type="text/html")

    async def _lying(self, request: web.Request) -> web.Response:
        return web.Response(body=b"x" * 5000, content_type="text/plain")

    async def _stalled(self, request: web.Request) -> web.Response:
        await self.stop_stalling.wait()
        return web.Response(text="too late")

    async def _release(self, app: web.Application) -> None:
        self.stop_stalling.set()


@pytest.fixture
async def fetch():
    with FileServer() as server:
        async with aiohttp.ClientSession() as session:

            async def get(path: str, *, size: int = 5, timeout: float = 10.0) -> bytes:
                file = SharedFile(
                    id="F1", name="a.txt", mimetype="text/plain", size=size, url=server.url + path
                )
                return await download(session, file, TOKEN, max_bytes=1000, timeout=timeout)

            yield get


async def test_the_file_is_fetched_with_the_bot_token(fetch):
    assert await fetch("/ok") == b"hello"


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/missing", "Slack answered HTTP 404"),
        ("/login", "sign-in page (does the app have the files:read scope?)"),
        ("/lying", "over the 1 KB the bot reads"),  # announced as 5 bytes, 5000 came
    ],
)
async def test_a_failed_download_says_why(fetch, path, reason):
    with pytest.raises(UnreadableFile, match=re.escape(reason)):
        await fetch(path)


async def test_a_download_that_never_finishes_gives_up_and_says_so(fetch):
    with pytest.raises(UnreadableFile, match=re.escape("the download took longer than 0.2 s")):
        await fetch("/stalled", timeout=0.2)


async def test_no_link_means_no_download():
    async with aiohttp.ClientSession() as session:
        with pytest.raises(UnreadableFile, match="did not give the bot a link"):
            await download(session, SharedFile(id="F1", name="a.txt"), TOKEN, max_bytes=10)
