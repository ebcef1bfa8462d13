"""`serve_ops` while a process starts, over real HTTP: Slack's requests to a path not served yet are
told to come back (503 with ``Retry-After``), not that nothing is there, and the port is free again
once the context ends."""

from __future__ import annotations

import aiohttp

from bot.ops.health import Readiness
from bot.ops.server import STARTING_RETRY_SECONDS, Probes, serve_ops
from tests.standins import free_port

EVENTS = "/slack/events"
"""The path Slack posts to, served only once the process is ready."""


async def test_slacks_requests_while_starting_are_told_to_come_back_and_others_are_not_found():
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        async with serve_ops(port, Probes(Readiness()), not_yet=(EVENTS,)):
            async with session.post(f"{base}{EVENTS}", data=b"{}") as early:
                retry_after, early_status = early.headers.get("Retry-After"), early.status
            async with session.post(f"{base}/elsewhere", data=b"{}") as elsewhere:
                elsewhere_status = elsewhere.status
        async with serve_ops(port, Probes(Readiness())), session.get(f"{base}/healthz") as again:
            served_again = again.status  # the port was let go and can be served again

    assert (early_status, retry_after) == (503, str(STARTING_RETRY_SECONDS))
    assert elsewhere_status == 404
    assert served_again == 200
