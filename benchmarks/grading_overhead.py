"""Benchmark: the revise-and-grade loop's overhead per graded iteration.

Scripted zero-latency models and langgraph's SqliteSaver; 40 threads, each
needing exactly 2 grader iterations (the first answer needs one revision).
Measures `grading.RubricMiddleware` and, when deepagents is installed,
deepagents' `RubricMiddleware` in the same run, plus a plain agent doing the
same worker turns without grading, so the overhead of the loop itself shows.

    python benchmarks/grading_overhead.py [--threads 40] [--repeats 3]

Writes a JSON summary to benchmarks/results/grading_overhead.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite import SqliteSaver

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grading import RubricMiddleware
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

RUBRIC = "- The answer is revised\n- The answer mentions spring"
CRITERIA = ["The answer is revised", "The answer mentions spring"]
ITERATIONS_PER_THREAD = 2


def worker_script(messages: list[BaseMessage]) -> str:
    revising = any(m.type == "human" and "rubric" in (m.name or "") for m in messages)
    return "a revised poem about spring" if revising else "a poem about spring"


def grader_script(schema: str) -> Callable[[list[BaseMessage]], AIMessage]:
    def script(messages: list[BaseMessage]) -> AIMessage:
        revised = "a revised poem" in payload_of(messages)
        criteria = [
            {"name": CRITERIA[0], "passed": revised, **({} if revised else {"gap": "revise it"})},
            {"name": CRITERIA[1], "passed": True},
        ]
        result = "satisfied" if revised else "needs_revision"
        return grade_call(schema, {"result": result, "explanation": "ok", "criteria": criteria})

    return script


def build(kind: str, saver: SqliteSaver) -> Any:
    worker = ScriptedChatModel(script=worker_script)
    if kind == "plain":
        return create_agent(model=worker, checkpointer=saver)
    if kind == "ours":
        grader = ScriptedChatModel(script=grader_script("RubricGrade"))
        return create_agent(model=worker, middleware=[RubricMiddleware(model=grader)], checkpointer=saver)
    from deepagents import RubricMiddleware as DeepAgentsRubricMiddleware

    grader = ScriptedChatModel(script=grader_script("GraderResponse"))
    return create_agent(
        model=worker, middleware=[DeepAgentsRubricMiddleware(model=grader)], checkpointer=saver
    )


def run_once(kind: str, threads: int) -> float:
    """Seconds to run `threads` conversations to the end of their grading run."""
    with tempfile.TemporaryDirectory() as tmp, SqliteSaver.from_conn_string(f"{tmp}/cp.sqlite") as saver:
        agent = build(kind, saver)
        start = time.perf_counter()
        for n in range(threads):
            config = {"configurable": {"thread_id": f"{kind}-{n}"}}
            if kind == "plain":
                # The same worker turns the graded runs make, without any grading.
                for _ in range(ITERATIONS_PER_THREAD):
                    agent.invoke({"messages": [HumanMessage("Write a poem")]}, config)
                continue
            agent.invoke({"messages": [HumanMessage("Write a poem")], "rubric": RUBRIC}, config)
            values = agent.get_state(config).values
            assert values["_rubric_status"] == "satisfied", values.get("_rubric_status")
            assert values["_rubric_iterations"] == ITERATIONS_PER_THREAD
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    kinds = ["plain", "ours"]
    try:
        import deepagents  # noqa: F401

        kinds.append("deepagents")
    except ImportError:
        print("deepagents is not installed; measuring ours only (pip install -e '.[bench]')")
    graded = args.threads * ITERATIONS_PER_THREAD
    run_once("ours", 2)  # warm imports and caches outside the measurement
    seconds = {kind: [] for kind in kinds}
    for _ in range(args.repeats):
        for kind in kinds:  # interleaved so drift hits every kind alike
            seconds[kind].append(run_once(kind, args.threads))
    best = {kind: min(times) for kind, times in seconds.items()}
    summary: dict[str, Any] = {"threads": args.threads, "graded_iterations": graded}
    print(f"{args.threads} threads x {ITERATIONS_PER_THREAD} graded iterations, best of {args.repeats}")
    print(f"{'agent':<12}{'ms/iteration':>14}{'overhead ms/iteration':>24}{'median ms/iteration':>22}")
    for kind in kinds:
        per_iteration = best[kind] * 1000 / graded
        overhead = (best[kind] - best["plain"]) * 1000 / graded
        median = statistics.median(seconds[kind]) * 1000 / graded
        summary[kind] = {"ms_per_iteration": per_iteration, "overhead_ms_per_iteration": overhead}
        print(f"{kind:<12}{per_iteration:>14.2f}{overhead:>24.2f}{median:>22.2f}")
    if "deepagents" in best:
        ratio = best["ours"] / best["deepagents"]
        summary["ours_vs_deepagents_time_ratio"] = ratio
        print(f"ours / deepagents wall time: {ratio:.2f} (target: ours no slower)")
    out = Path(__file__).parent / "results" / "grading_overhead.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(summary, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
