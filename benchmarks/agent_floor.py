"""Benchmark: the bot's agent loop alone, without Slack — the floor under `bot_load.py`'s ratio.

Runs the bot's own agent (`bot.agent.build_agent`: ChatOpenAI worker and grader with the evidence
tools, `RubricMiddleware`, langgraph's AsyncSqliteSaver) against the local model stand-in answering
after 0.3 s: one conversation alone (the ideal path), then 100 at once in one process. What the
ratio of the two cannot go below tells whether the bot's own code or the langchain stack sets it.

    python benchmarks/agent_floor.py [--threads 100] [--latency 0.3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.chat_models import init_chat_model
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent import build_agent
from tests.standins.model_api import ModelApiStandin, fixed_grader

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


async def measure(threads: int, latency: float) -> None:
    with ModelApiStandin() as api, tempfile.TemporaryDirectory() as tmp:
        api.grader = fixed_grader(CRITERIA)
        api.latency = latency
        os.environ["OPENAI_BASE_URL"] = api.base_url
        os.environ["OPENAI_API_KEY"] = "benchmark"
        async with AsyncSqliteSaver.from_conn_string(f"{tmp}/floor.sqlite") as saver:
            models = init_chat_model("openai:gpt-4o-mini"), init_chat_model("openai:gpt-4o-mini")
            agent = build_agent(*models, max_iterations=3, checkpointer=saver)
            await converse(agent, "warm-up")
            start = time.perf_counter()
            await converse(agent, "alone")
            ideal = time.perf_counter() - start
            start, cpu = time.perf_counter(), time.process_time()
            await asyncio.gather(*(converse(agent, f"t{n}") for n in range(threads)))
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(f"agent loop only, model latency {latency} s, {threads} conversations at once")
    print(f"  one conversation alone   {ideal:6.2f} s")
    print(f"  {threads} at once            {wall:6.2f} s   ratio {wall / ideal:.2f}")
    print(f"  CPU (this process, incl. the stand-in) {1000 * cpu / threads:.1f} ms per conversation")
    print(f"  most model requests in flight at once: {api.peak_concurrency}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.3)
    args = parser.parse_args()
    asyncio.run(measure(args.threads, args.latency))


if __name__ == "__main__":
    main()
