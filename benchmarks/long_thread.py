"""Benchmark: what one long thread costs the worker per turn, with and without the context limit.

Plays a 40-turn thread through the bot's own agent (`bot.agent.worker.build_agent` and `run_turn`, as the
runner calls them: ChatOpenAI worker and grader, `RubricMiddleware`, the summarizing middleware,
langgraph's AsyncSqliteSaver) against the local model stand-in, served by a process of its own.
Every answer is long (`--answer-words`; by default about a fifth of the default limit, in langchain's
approximate tokens), so history grows fast: a busy thread. It prints, per turn, the worker's input
tokens as the stand-in counts them (words) without a limit (`RUBRIC_BOT_CONTEXT_TOKENS=0`) and with
`--limit` (default: the bot's default), then for each the ratio of turn 40 to turn 5 and of the
dearest turn after turn 5 to turn 5.

    python benchmarks/long_thread.py [--turns 40] [--limit 24000] [--answer-words 1750]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from langchain.chat_models import init_chat_model
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent.turn import run_turn
from bot.agent.worker import agent_config, build_agent
from bot.config import DEFAULT_CONTEXT_TOKENS
from grading import RubricEvaluation
from tests.standins.model_process import ModelProcess

CRITERIA = ["The answer is polite", "The answer cites a source"]
RUBRIC = "\n".join(f"- {criterion}" for criterion in CRITERIA)

COMPARED_TURNS = (5, 40)
"""The turns whose costs the issue compares: turn 40 should cost at most about 1.5 times turn 5."""


def long_answer(words: int) -> str:
    """An answer of `words` distinct-looking words (the stand-in counts words as tokens)."""
    return " ".join(f"detail{n}" for n in range(words))


async def play(turns: int, limit: int, answer_words: int) -> tuple[list[int], int]:
    """The worker's input tokens per turn of a `turns`-turn thread, and how many summaries were written."""
    with ModelProcess(CRITERIA, long_answer(answer_words), latency=0.0) as api:
        os.environ["OPENAI_BASE_URL"] = api.base_url
        os.environ["OPENAI_API_KEY"] = "benchmark"
        with tempfile.TemporaryDirectory() as tmp:
            async with AsyncSqliteSaver.from_conn_string(f"{tmp}/long.sqlite") as saver:
                models = init_chat_model("openai:gpt-4o-mini"), init_chat_model("openai:gpt-4o-mini")
                agent = build_agent(*models, max_iterations=3, checkpointer=saver, context_tokens=limit)
                config = agent_config("long-thread")

                async def ignore(evaluation: RubricEvaluation) -> None:
                    pass

                for turn in range(1, turns + 1):
                    inputs = {"messages": [HumanMessage(f"Question {turn}: and what about part {turn}?")]}
                    if turn == 1:
                        inputs["rubric"] = RUBRIC
                    await run_turn(agent, inputs, config, ignore)
    return api.stats["worker_prompt_tokens"], api.stats["summary_requests"]


async def compare(turns: int, limit: int, answer_words: int) -> list[tuple[list[int], int]]:
    """The thread played without a limit, then with `limit` (in one event loop: langchain-openai
    keeps its HTTP clients for the loop they were made in)."""
    return [await play(turns, 0, answer_words), await play(turns, limit, answer_words)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--limit", type=int, default=DEFAULT_CONTEXT_TOKENS, help="RUBRIC_BOT_CONTEXT_TOKENS")
    parser.add_argument("--answer-words", type=int, default=1750)
    args = parser.parse_args()
    (unlimited, _), (limited, summaries) = asyncio.run(compare(args.turns, args.limit, args.answer_words))
    print(f"{args.turns}-turn thread, answers of {args.answer_words} words; worker input tokens per turn")
    print(f"{'turn':>4}  {'no limit':>9}  {f'limit {args.limit}':>12}")
    for turn, (without, with_limit) in enumerate(zip(unlimited, limited, strict=True), start=1):
        print(f"{turn:>4}  {without:>9,}  {with_limit:>12,}")
    first, last = COMPARED_TURNS
    if len(limited) >= last:
        for name, costs in (("no limit", unlimited), (f"limit {args.limit}", limited)):
            base = costs[first - 1]
            dearest = max(costs[first - 1 :])
            print(
                f"{name}: turn {last} costs {costs[last - 1] / base:.2f}x turn {first}; "
                f"the dearest turn after it {dearest / base:.2f}x"
            )
    print(f"summaries written with the limit: {summaries}")


if __name__ == "__main__":
    main()
