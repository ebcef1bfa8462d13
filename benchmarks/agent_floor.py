"""Benchmark: the bot's agent loop alone, without Slack — the floor under `bot_load.py`'s ratio.

Runs the bot's own agent (`bot.agent.worker.build_agent`: the ChatOpenAI worker and grader the bot
loads, `bot.agent.openai_json.as_json`, sharing one model as the bot's do when no grader model is set,
with the evidence tools, `RubricMiddleware`, langgraph's AsyncSqliteSaver) against the local model
stand-in answering after 0.3 s, served by a process of its own: one conversation alone (the ideal
path), then 100 at once in one process; with ``--revisions 1`` each answer needs one revision (four
model calls a conversation, as in ``bot_load.py --revisions 1``).
What the ratio of the two cannot go below tells whether the bot's own code or
the langchain stack sets it; the CPU time of this process per conversation is the agent loop's cost.

    python benchmarks/agent_floor.py [--threads 100] [--latency 0.3] [--revisions 0|1]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import uvloop
from langchain.chat_models import init_chat_model
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent.openai_json import as_json
from bot.agent.worker import build_agent
from tests.standins.model_process import ModelProcess

CRITERIA = ["The answer is polite", "The answer cites a source"]
RUBRIC = "\n".join(f"- {criterion}" for criterion in CRITERIA)


async def converse(agent: object, thread: str) -> None:
    """One graded turn, with the state reads the bot makes around it."""
    config = {"configurable": {"thread_id": thread}}
    await agent.aget_state(config)
    inputs = {"messages": [HumanMessage("Is coffee good for you?")], "rubric": RUBRIC}
    async for _ in agent.astream(inputs, config, stream_mode="custom"):
        pass
    await agent.aget_state(config)


async def measure(threads: int, latency: float, revisions: int) -> dict[str, float]:
    """Ideal path, wall time of `threads` at once, their ratio and this process's CPU per conversation."""
    answer = "Coffee is fine in moderation."
    with ModelProcess(CRITERIA, answer, revisions=revisions, latency=latency) as api:
        os.environ["OPENAI_BASE_URL"] = api.base_url
        os.environ["OPENAI_API_KEY"] = "benchmark"
        with tempfile.TemporaryDirectory() as tmp:
            async with AsyncSqliteSaver.from_conn_string(f"{tmp}/floor.sqlite") as saver:
                model = as_json(init_chat_model("openai:gpt-4o-mini"))
                agent = build_agent(model, model, max_iterations=3, checkpointer=saver)
                await converse(agent, "warm-up")
                start = time.perf_counter()
                await converse(agent, "alone")
                ideal = time.perf_counter() - start
                start, cpu = time.perf_counter(), time.process_time()
                await asyncio.gather(*(converse(agent, f"t{n}") for n in range(threads)))
                wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return {
        "ideal_s": ideal,
        "wall_s": wall,
        "ratio": wall / ideal,
        "cpu_ms_per_conversation": 1000 * cpu / threads,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument(
        "--revisions", type=int, choices=(0, 1), default=0, help="revisions each answer needs"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as one line of JSON")
    args = parser.parse_args()
    # The event loop `serve` runs on (bot.cli.serve), so that the floor is the loop's cost there.
    result = uvloop.run(measure(args.threads, args.latency, args.revisions))
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"agent loop only, model latency {args.latency} s, {args.threads} conversations at once, "
        f"{args.revisions} revision(s) each"
    )
    print(f"  one conversation alone   {result['ideal_s']:6.2f} s")
    print(f"  {args.threads} at once            {result['wall_s']:6.2f} s   ratio {result['ratio']:.2f}")
    print(f"  CPU (this process; the stand-in runs in its own) {result['cpu_ms_per_conversation']:.1f} ms")


if __name__ == "__main__":
    main()
