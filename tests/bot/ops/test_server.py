"""The ops routes over real HTTP: while a process starts, Slack's requests to its port are told to
come back (503 with ``Retry-After``), not that nothing is there; that public port answers the probes
but never `/metrics`, which only the metrics port serves; each port is free again once its context
ends."""

from __future__ import annotations

import aiohttp

from bot.ops.health import Readiness
from bot.ops.server import STARTING_RETRY_SECONDS, Probes, serve_ops, serve_starting
from tests.standins import free_port

EVENTS = "/slack/events"
"""The path Slack posts to, served only once the process is ready."""


async def test_slacks_requests_while_starting_are_told_to_come_back_and_others_are_not_found():
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    async with aiohttp.ClientSession() as session:
        async with serve_starting(port, Probes(Readiness()), not_yet=(EVENTS,)):
            async with session.post(f"{base}{EVENTS}", data=b"{}") as early:
                retry_after, early_status = early.headers.get("Retry-After"), early.status
            async with session.post(f"{base}/elsewhere", data=b"{}") as elsewhere:
                elsewhere_status = elsewhere.status
        async with serve_ops(port, Probes(Readiness())), session.get(f"{base}/healthz") as again:
            served_again = again.status  # the port was let go and can be served again

    assert (early_status, retry_after) == (503, str(STARTING_RETRY_SECONDS))
    assert elsewhere_status == 404
    assert served_again == 200


async def test_slacks_port_answers_the_probes_and_only_the_metrics_port_answers_metrics():
    public, private = free_port(), free_port()
    probes = Probes(Readiness())
    async with (
        aiohttp.ClientSession() as session,
        serve_starting(public, probes, not_yet=(EVENTS,)),
        serve_ops(private, probes),
    ):
        answers = {}
        for port in (public, private):
            for path in ("/healthz", "/readyz", "/metrics"):
                async with session.get(f"http://127.0.0.1:{port}{path}") as response:
                    answers[port, path] = (response.status, await response.text())

    assert answers[public, "/healthz"] == answers[private, "/healthz"] == (200, "ok\n")
    assert answers[public, "/readyz"][0] == answers[private, "/readyz"][0] == 503  # starting
    assert answers[public, "/metrics"][0] == 404
    status, text = answers[private, "/metrics"]
    assert status == 200 and "rubric_bot_runs_total" in text
