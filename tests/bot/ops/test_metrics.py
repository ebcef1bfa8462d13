"""`/metrics` and the counters behind it, in process: each counter moves by what its name says and
nothing else, `/metrics` answers while the database is down (showing no queue rather than a stale
one), and a worker's metrics port serves all three routes from its first moment.

Counters are the process's own (Prometheus's default registry), so each test reads how much one
moved, not its value.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from langchain_core.messages.ai import UsageMetadata
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError

from bot.agent.models import ModelPair
from bot.agent.turn import TurnOutcome
from bot.config import Settings
from bot.db.admin import upgrade
from bot.db.database import Database
from bot.limits.prices import role_usage
from bot.ops import metrics
from bot.ops.health import Readiness
from bot.ops.metrics import JOB_STATES, RUN_STATUSES
from bot.ops.server import Probes, add_ops_routes, serve_ops
from bot.queue.durable import open_queue
from bot.slack.client import attempt, build_client, log_listener_failure
from tests.standins import free_port
from tests.standins.slack_api import SlackApiStandin
from tests.standins.tcp_link import TcpLink, via_link

TOKEN = "xoxb-metrics-tests"
"""The bot token the Slack stand-in takes."""
Labels = dict[str, str]
"""A sample's labels, by name."""
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]
"""Samples by name and sorted labels."""


def sample(name: str, **labels: str) -> float:
    """A sample's current value in this process (0 when it has none yet)."""
    return REGISTRY.get_sample_value(name, labels) or 0.0


class Moves:
    """How much each sample named (name and labels) moved since this was made, when called."""

    def __init__(self, *names: tuple[str, Labels]) -> None:
        self._before = {(name, tuple(labels.items())): sample(name, **labels) for name, labels in names}

    def __call__(self) -> Samples:
        return {
            key: round(sample(key[0], **dict(key[1])) - before, 9) for key, before in self._before.items()
        }


def runs(status: str) -> tuple[str, Labels]:
    return "rubric_bot_runs_total", {"status": status}


def usage(tokens: int) -> UsageMetadata:
    return UsageMetadata(input_tokens=tokens - 10, output_tokens=10, total_tokens=tokens)


def outcome(*, grader_calls: int, worker_tokens: int, grader_tokens: int) -> TurnOutcome:
    return TurnOutcome(
        status="satisfied",
        answer="An answer.",
        iterations=grader_calls,
        max_iterations=3,
        best_iteration=None,
        worker_usage=usage(worker_tokens),
        grader_usage=usage(grader_tokens),
        grader_calls=grader_calls,
    )


@pytest.mark.parametrize("status", RUN_STATUSES)
def test_a_finished_run_is_counted_under_its_status_only_with_its_duration(status):
    moved = Moves(*(runs(s) for s in RUN_STATUSES), ("rubric_bot_run_seconds_count", {}))
    seconds = Moves(("rubric_bot_run_seconds_sum", {}))

    metrics.run_finished(status, 4.5)

    expected = {key: 1.0 if key[1] in ((("status", status),), ()) else 0.0 for key in moved()}
    assert moved() == expected
    assert list(seconds().values()) == [4.5]


def test_a_runs_grader_calls_tokens_and_money_are_counted_by_role():
    roles = [("rubric_bot_tokens_total", {"role": r}) for r in ("worker", "grader")]
    money = [("rubric_bot_cost_usd_total", {"role": r}) for r in ("worker", "grader")]
    moved = Moves(("rubric_bot_grader_calls_total", {}), *roles, ("rubric_bot_unpriced_runs_total", {}))
    paid = Moves(*money)
    priced = outcome(grader_calls=2, worker_tokens=1_000, grader_tokens=300)
    priced = priced.priced(ModelPair("openai:gpt-4o-mini", "openai:gpt-4o-mini"), "openai:gpt-4o-mini")

    metrics.run_finished("satisfied", 1.0, priced)

    assert list(moved().values()) == [2.0, 1_000.0, 300.0, 0.0]
    worker_usd, grader_usd = paid().values()
    assert priced.cost is not None
    assert (worker_usd, grader_usd) == pytest.approx(
        (priced.cost.role_usd("worker"), priced.cost.role_usd("grader"))
    )
    assert worker_usd > grader_usd > 0


def test_a_run_on_a_model_the_price_table_does_not_know_is_counted_unpriced():
    moved = Moves(("rubric_bot_unpriced_runs_total", {}), ("rubric_bot_cost_usd_total", {"role": "worker"}))
    unknown = outcome(grader_calls=1, worker_tokens=500, grader_tokens=100)
    unknown = unknown.priced(ModelPair("openai:no-such-model-7", "openai:gpt-4o-mini"), "openai:gpt-4o-mini")

    metrics.run_finished("answered", 1.0, unknown)

    assert list(moved().values()) == [1.0, 0.0]


@pytest.mark.parametrize(
    ("verdict", "loop_passed", "iterations", "agreement", "bucket"),
    [
        ("pass", True, 1, "agree", "1"),
        ("fail", True, 2, "disagree", "2"),
        ("pass", False, 3, "disagree", "3+"),
        ("fail", False, 7, "agree", "3+"),
        ("error", True, 1, "error", "1"),
    ],
)
def test_an_audit_is_counted_by_agreement_how_the_loop_ended_and_its_iterations(
    verdict, loop_passed, iterations, agreement, bucket
):
    loop = "passed" if loop_passed else "failed"
    cells = [
        ("rubric_bot_audit_total", {"agreement": a, "loop": loop, "iterations": bucket})
        for a in ("agree", "disagree", "error")
    ]
    spent = [("rubric_bot_tokens_total", {"role": role}) for role in ("audit", "grader")]
    moved = Moves(*cells, *spent, ("rubric_bot_cost_usd_total", {"role": "audit"}))
    cost = role_usage("openai:gpt-4o-mini", usage(250))

    metrics.audit_finished(verdict, loop_passed=loop_passed, iterations=iterations, cost=cost)

    counted = [1.0 if cell[1]["agreement"] == agreement else 0.0 for cell in cells]
    # The audit grader's tokens and money count as its own role's, not the loop grader's.
    assert cost.usd
    assert list(moved().values()) == pytest.approx([*counted, 250.0, 0.0, cost.usd])


def test_an_audit_a_spent_budget_skipped_is_counted():
    moved = Moves(("rubric_bot_audits_skipped_total", {}))

    metrics.audit_skipped()

    assert list(moved().values()) == [1.0]


@pytest.fixture
def slack() -> Iterator[SlackApiStandin]:
    with SlackApiStandin(token=TOKEN) as api:
        yield api


@pytest.fixture
async def client(slack: SlackApiStandin) -> AsyncIterator[AsyncWebClient]:
    """The bot's own Web API client (its retries included), talking to the stand-in."""
    async with aiohttp.ClientSession() as session:
        yield build_client(Settings(slack_bot_token=TOKEN, slack_api_url=slack.api_url), session)


SLACK_ERRORS_TOTAL: tuple[str, Labels] = ("rubric_bot_slack_errors_total", {})
"""Slack Web API calls that failed for good."""


async def test_a_slack_call_that_fails_for_good_is_counted_once_and_one_taken_on_retry_is_not(slack, client):
    moved = Moves(SLACK_ERRORS_TOTAL)
    slack.error_next("chat.postMessage", "channel_not_found")
    slack.fail_next("reactions.add", status=503)  # the client's retry gets it through

    refused = await attempt(client.chat_postMessage(channel="C1", text="hello"), "post")
    retried = await attempt(client.reactions_add(channel="C1", timestamp="1.0", name="eyes"), "react")
    posted = await attempt(client.chat_postMessage(channel="C1", text="hello"), "post")

    assert refused is None and retried is not None and posted is not None
    assert list(moved().values()) == [1.0]


async def test_a_listeners_slack_failure_is_counted_and_a_database_failure_is_not(caplog):
    caplog.set_level(logging.CRITICAL)  # the handler's lines are tested with the listeners
    moved = Moves(SLACK_ERRORS_TOTAL)
    refused = SlackApiError("refused", {"ok": False, "error": "not_in_channel"})

    await log_listener_failure(refused, {"command": "/rubric"})
    await log_listener_failure(OperationalError("SELECT 1", {}, Exception("gone")), {"command": "/rubric"})

    assert list(moved().values()) == [1.0]


# -- /metrics -------------------------------------------------------------------------------------


def shown(text: str) -> Samples:
    """Every sample of a /metrics answer, by name and sorted labels."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def queue_states(samples: Samples) -> dict[str, float]:
    """The queue's gauge: jobs by state."""
    gauge = "rubric_bot_queue_jobs"
    return {dict(labels)["state"]: v for (name, labels), v in samples.items() if name == gauge}


async def scrape(client: TestClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status == 200
    return shown(await response.text())


@pytest.mark.postgres
async def test_metrics_answer_while_the_database_is_down_without_a_stale_queue(postgres_url, caplog):
    await upgrade(Database.parse(postgres_url))  # the queue's tables
    server = make_url(postgres_url)
    with TcpLink(server.host or "127.0.0.1", server.port or 5432) as link:
        async with open_queue(Database.parse(via_link(postgres_url, link))) as queue:
            app = web.Application()
            # Counts not reused: the scrape right after the cut must not show the one before it.
            add_ops_routes(app, Probes(Readiness(), job_counts=queue.job_counts, reuse_seconds=0))
            async with TestClient(TestServer(app)) as client:
                up = await scrape(client)
                link.cut()
                down = await scrape(client)

    assert queue_states(up) == dict.fromkeys(JOB_STATES, 0.0)
    assert queue_states(down) == {}  # unknown, not the last count passed off as current
    assert {("rubric_bot_runs_total", (("status", s),)) for s in RUN_STATUSES} <= down.keys()
    assert "could not count the queue's jobs for /metrics" in caplog.text


async def test_a_metrics_port_of_its_own_serves_all_three_routes_from_the_start(database_url):
    """The port of `rubric-bot worker` and of Socket Mode, over real HTTP as Prometheus scrapes it."""
    port = free_port()
    # As the process makes them, before its database is ready (counts not reused: the scrape right
    # after the queue opens shows it).
    probes = Probes(Readiness(), reuse_seconds=0)
    async with serve_ops(port, probes):
        base = f"http://127.0.0.1:{port}"
        starting = [await get(f"{base}{path}") for path in ("/healthz", "/readyz")]
        before = shown((await get(f"{base}/metrics"))[1])
        await upgrade(Database.parse(database_url))  # as the process prepares its database
        async with open_queue(Database.parse(database_url)) as queue:
            probes.job_counts = queue.job_counts
            after = shown((await get(f"{base}/metrics"))[1])

    assert starting[0] == (200, "ok\n") and starting[1][0] == 503
    assert queue_states(before) == {}
    assert queue_states(after) == dict.fromkeys(JOB_STATES, 0.0)
    assert ("rubric_bot_slack_errors_total", ()) in after


async def get(url: str) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status, await response.text()
