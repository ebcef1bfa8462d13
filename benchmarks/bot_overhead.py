"""Benchmark: the bot's own work in a conversation, piece by piece and alone -- the floor under
`bot_load.py`'s CPU ratio.

Besides the agent loop, one conversation that passes its first grading costs the bot:

- its store calls: the claim (dedupe keys, the thread, the workspace's limits, the run, in one
  transaction), whether the thread is still kept as the job starts and as it ends, the run's start
  (lease, interrupted runs, the request's material, the channel rubric, the workspace's models), the
  grader's calibration read, the iteration's message with its evaluation, the end (status and
  closing message), and on PostgreSQL the lease check before each of the two posts;
- its Slack Web API calls: two thread statuses (drafting, grading) and two messages (the
  evaluation with its review buttons, the final answer), rendered as the bot renders them;

Each piece is replayed for --conversations conversations at once in this process, on the bot's
event loop (uvloop), against a fresh SQLite file, a fresh PostgreSQL schema and the Slack stand-in
in a process of its own; its CPU per conversation (this process's, so SQLite's threads count and
PostgreSQL's server does not, as in `bot_load.py`) is printed beside the agent loop's
(`agent_floor.py`, same loop, same machine, measured right after). Not counted here: the event's
ingress (aiohttp, Bolt, signature check, ack) and the job queue's own statements on PostgreSQL.

With ``--profile`` it then runs `bot_load.py`'s load on SQLite once more with the served bot under
the profiler (see `bot_profile.py`) and prints where a whole conversation's CPU went, ingress and
queue included, with its Slack Web API calls and statements.

    python benchmarks/bot_overhead.py [--conversations 100] [--rounds 3] [--postgres URL] [--profile]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import uvloop
from slack_bolt.async_app import AsyncSetStatus
from slack_sdk.web.async_client import AsyncWebClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bot_load import agent_loop_alone, fresh_schema

from bot.db.evaluations import PostedEvaluation
from bot.db.ledger import PostedPart
from bot.db.material import RunMaterial
from bot.db.runs import RunLease, RunStart, new_lease
from bot.db.spend import QuotaExceeded
from bot.db.store import Store
from bot.db.transactions import Claim, Starting
from bot.limits.quota import DailyLimits
from bot.rendering.results import evaluation_message, final_messages
from bot.review.controls import review_controls
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from grading import RubricEvaluation
from tests.standins.slack_api import SlackApiStandin

TOKEN = "xoxb-benchmark"
"""The bot token the Slack stand-in expects."""
WORKSPACE = Workspace("TBENCH")
RUBRIC = "- Answers the question\n- Is at most two sentences"
"""The channel rubric, as the runs read it."""
LIMITS = DailyLimits(requests_per_user=1_000_000)
"""A per-person limit, checked on every claim as in a default deployment, never reached."""
ANSWER = "Water boils at 100 °C at sea level. " * 8


def evaluation(run: str) -> RubricEvaluation:
    """A passing first iteration, as the grading middleware reports it."""
    criteria = [
        {"name": name.removeprefix("- "), "passed": True, "gap": "", "score": None}
        for name in RUBRIC.splitlines()
    ]
    return {  # type: ignore[return-value]
        "grading_run_id": run,
        "iteration": 0,
        "max_iterations": 3,
        "kind": "list",
        "result": "satisfied",
        "explanation": "Both criteria are met.",
        "criteria": criteria,
        "unmatched": [],
        "score": None,
        "verdict": None,
        "usage": {"input_tokens": 300, "output_tokens": 40, "total_tokens": 340},
        "grader_calls": 1,
        "answer_message_id": f"ai-{run}",
        "best_iteration": 0,
        "calibration": [],
    }


async def store_conversation(store: Store, number: int, *, postgres: bool) -> None:
    """The store calls of one conversation, in the runner's order."""
    thread = ThreadKey.of(WORKSPACE, f"C{number % 20:02d}", f"1700000000.{number:06d}")

    def request(claim: Claim) -> Starting[int | QuotaExceeded]:
        claim.workspace_settings(WORKSPACE)
        run = RunStart(thread, thread.thread_ts, "U1", LIMITS.quota(datetime.now(UTC)))
        return Starting(run, lambda started: started)

    run_id = await store.claiming([f"event:Ev{number}", f"msg:{thread.thread_id}"], request, thread=thread)
    assert isinstance(run_id, int)
    await store.has_thread(thread)
    lease = RunLease(new_lease()) if postgres else None
    await store.start_attempt(
        run_id, thread, RunMaterial(0, [], []), channel_rubric=True, lease=lease, settings=True
    )
    await store.recent_disagreements(WORKSPACE, thread.channel, RUBRIC, calibrating_only=True)
    if lease:
        await store.holds_run(run_id, lease.key)
    shown = PostedEvaluation(thread, evaluation(f"run-{number}"), RUBRIC)
    await store.record_posted(run_id, 0, 0, f"1700000001.{number:06d}", shown)
    if lease:
        await store.holds_run(run_id, lease.key)
    await store.finish_run(run_id, "satisfied", 340, [PostedPart("final", 0, f"1700000002.{number:06d}")])
    await store.has_thread(thread)


async def slack_conversation(client: AsyncWebClient, number: int) -> None:
    """The Slack Web API calls of one conversation, rendered as the bot renders them."""
    channel, ts = f"C{number % 20:02d}", f"1700000000.{number:06d}"
    status = AsyncSetStatus(client, channel, ts)
    await status("is writing a draft…")
    await status("is grading iteration 1/3…")
    graded = evaluation(f"run-{number}")
    message = evaluation_message(graded, review=review_controls(graded))
    await client.chat_postMessage(channel=channel, thread_ts=ts, **message)
    for final in final_messages("satisfied", ANSWER, iterations=1, max_iterations=3):
        await client.chat_postMessage(channel=channel, thread_ts=ts, **final)


async def cpu_per_conversation(
    conversation: Callable[[int], Awaitable[None]], count: int, first: int
) -> float:
    """This process's CPU milliseconds per conversation for `count` of them at once."""
    cpu = time.process_time()
    await asyncio.gather(*(conversation(first + n) for n in range(count)))
    return 1000 * (time.process_time() - cpu) / count


async def measure_store(database: str, count: int, *, postgres: bool) -> float:
    store = await Store.open(database)
    try:
        await store.set_channel_rubric(WORKSPACE, "C00", RUBRIC, "U9")
        conversation = lambda n: store_conversation(store, n, postgres=postgres)  # noqa: E731
        await cpu_per_conversation(conversation, 10, 1_000_000)  # warm-up: connections, statement caches
        return await cpu_per_conversation(conversation, count, 0)
    finally:
        await store.close()


async def measure_slack(base_url: str, count: int) -> float:
    client = AsyncWebClient(token=TOKEN, base_url=base_url)
    await cpu_per_conversation(lambda n: slack_conversation(client, n), 10, 1_000_000)
    return await cpu_per_conversation(lambda n: slack_conversation(client, n), count, 0)


def _serve_slack(pipe: Any) -> None:
    with SlackApiStandin(token=TOKEN) as slack:
        pipe.send(slack.api_url)
        pipe.recv()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=100, help="conversations at once")
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each figure is their median")
    parser.add_argument("--latency", type=float, default=0.3, help="the agent loop's model latency")
    parser.add_argument("--postgres", default=os.environ.get("RUBRIC_BOT_TEST_PG"), help="a PostgreSQL URL")
    parser.add_argument(
        "--profile", action="store_true", help="then profile the whole bot under bot_load.py's load (SQLite)"
    )
    parser.add_argument("--revisions", type=int, choices=(0, 1), default=1, help="with --profile: revisions")
    args = parser.parse_args()
    parent, child = multiprocessing.Pipe()
    slack = multiprocessing.get_context("spawn").Process(target=_serve_slack, args=(child,), daemon=True)
    slack.start()
    base_url = parent.recv()
    rows: dict[str, list[float]] = {}
    try:
        for _ in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                sqlite = uvloop.run(measure_store(f"{tmp}/bench.sqlite", args.conversations, postgres=False))
            rows.setdefault("store, SQLite", []).append(sqlite)
            if args.postgres:
                with fresh_schema(args.postgres) as url:
                    postgres = uvloop.run(measure_store(url, args.conversations, postgres=True))
                rows.setdefault("store, PostgreSQL", []).append(postgres)
            rows.setdefault("Slack Web API calls", []).append(
                uvloop.run(measure_slack(base_url, args.conversations))
            )
            # The pieces are a conversation that passes its first grading: so is the loop's.
            alone = argparse.Namespace(threads=args.conversations, latency=args.latency, revisions=0)
            floor = agent_loop_alone(alone)
            rows.setdefault("agent loop alone", []).append(floor["cpu_ms_per_conversation"])
    finally:
        parent.send("stop")
        slack.join(timeout=10)
    print(
        f"the bot's own work per conversation, {args.conversations} at once, median of {args.rounds} round(s)"
    )
    loop = statistics.median(rows["agent loop alone"])
    for name, values in rows.items():
        value = statistics.median(values)
        each = ", ".join(f"{v:.1f}" for v in values)
        print(f"  {name:<22}{value:>7.1f} ms  {value / loop:>5.2f}x the agent loop   ({each})")
    if args.profile:
        profile_whole_bot(args)


def profile_whole_bot(args: argparse.Namespace) -> None:
    """`bot_load.py --profile` on SQLite, in a process of its own: it prints the split."""
    command = [
        sys.executable,
        str(Path(__file__).with_name("bot_load.py")),
        "--setups=sqlite",
        "--profile",
        "--no-floor",
        "--rounds=1",
        "--ideal-runs=1",
        f"--threads={args.conversations}",
        f"--latency={args.latency}",
        f"--revisions={args.revisions}",
    ]
    subprocess.run(command, check=True)


if __name__ == "__main__":
    main()
