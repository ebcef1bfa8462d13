"""Benchmark: what a channel's grading costs with the grader's prompt laid out for prompt caches,
against the layout before it (the iteration number and a per-call nonce ahead of the rubric).

A channel's 20 runs of 2 or 3 iterations each (alternating), graded against a 12-criterion rubric
with 5 of the team's calibration examples, by `grading.TranscriptGrader` on `ChatOpenAI` talking to
the model stand-in in a process of its own. The stand-in counts a request's words as its tokens and,
as OpenAI does, reports as cached the prefix it shares with an earlier request once that reaches
1,024 tokens (in steps of 128). Anthropic caches only up to a breakpoint: with the new layout the
grader sets one after the fixed part, written by the channel's first request and read by every
later one (all within the cache's lifetime: runs back to back); the old layout set none.

For each layout it prints the grader's input tokens sent, the tokens a provider would serve from
its cache, and the money at list prices (genai-prices' bundled table) for an OpenAI and an
Anthropic model. The "before" layout is the grader module as it was at commit b01ae2f, read with
`git show` (so run this from a git checkout).

    python benchmarks/cost.py [--runs 20]

Writes a JSON summary to benchmarks/results/cost.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from unittest import mock

from genai_prices import Usage, calc_price
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import grading.middleware
from grading import CalibrationExample, TranscriptGrader, parse_rubric
from grading.grader import GRADER_SYSTEM_PROMPT, GraderPayload, build_payload, grade_schema
from tests.standins.model_process import ModelProcess

ROOT = Path(__file__).resolve().parents[1]
BEFORE_REVISION = "b01ae2f"
"""The last commit with the old layout of the grader's prompt."""

OPENAI_MODEL = ("openai", "gpt-4o-mini")
ANTHROPIC_MODEL = ("anthropic", "claude-sonnet-4-5")
ANTHROPIC_MIN_CACHE = 1024
"""The shortest prefix Anthropic caches for Sonnet models."""

CRITERIA = [
    "States the decision being asked for in its first sentence, without restating the whole request",
    "Names the owner of every follow-up action and gives each one a concrete due date",
    "Quotes every figure it relies on from the material shared in the thread, with its source",
    "Flags each assumption it makes explicitly and says what would change if it were wrong",
    "Keeps the summary under two hundred words while covering every open question raised",
    "Uses the team's product names exactly as they are written in the shared material",
    "Lists the risks in order of impact and gives a mitigation next to each of them",
    "Answers every question from the request, in the order in which it was asked",
    "Does not promise dates or features that the shared material does not commit to",
    "Points out any contradiction between two sources rather than silently picking one",
    "Ends with a short list of the decisions the reader must take, each as one line",
    "Writes for a reader outside the team: no internal jargon and no unexplained acronyms",
]
RUBRIC = "\n".join(f"- {name}" for name in CRITERIA)
EXAMPLES = [
    CalibrationExample(
        criterion=CRITERIA[n],
        grader_verdict="pass" if n % 2 else "fail",
        team_verdict="fail" if n % 2 else "pass",
        comment=f"Case {n + 1}: the grader read the criterion too literally here; the answer met its "
        "intent, which is what the team cares about when it reviews these summaries each week.",
    )
    for n in range(5)
]
DRAFT = " ".join(["The draft answer covers the launch plan, the owners and the open risks."] * 12)
REVISED = " ".join(["The revised answer adds due dates, sources and a list of decisions."] * 12)


@dataclass
class Totals:
    """The grader's requests of one layout: tokens sent and cached, output, and their money."""

    requests: int = 0
    input_tokens: int = 0
    openai_cached: int = 0
    anthropic_cache_read: int = 0
    anthropic_cache_write: int = 0
    output_tokens: int = 0

    def usd(self, model: tuple[str, str]) -> float:
        provider, name = model
        openai = provider == "openai"
        usage = Usage(
            input_tokens=self.input_tokens,  # all input, cached and cache writes included
            cache_read_tokens=self.openai_cached if openai else self.anthropic_cache_read,
            cache_write_tokens=0 if openai else self.anthropic_cache_write,
            output_tokens=self.output_tokens,
        )
        return float(calc_price(usage, name, provider_id=provider).total_price)


def transcript(run: int, iteration: int) -> list[AnyMessage]:
    """What the grader sees at one iteration of one run: the request, then the answers and feedback."""
    messages: list[AnyMessage] = [HumanMessage(f"Request {run}: summarize the launch review for the leads.")]
    for n in range(iteration + 1):
        messages.append(AIMessage(f"{REVISED if n else DRAFT} (run {run}, version {n + 1})"))
        if n < iteration:
            messages.append(HumanMessage(f"Grader feedback on version {n + 1}: add due dates."))
    return messages


def old_build_payload() -> Callable[..., GraderPayload]:
    """`build_payload` as of BEFORE_REVISION: all of it one varying part (nothing was laid out)."""
    source = subprocess.run(
        ["git", "show", f"{BEFORE_REVISION}:grading/grader.py"], cwd=ROOT, check=True, capture_output=True
    ).stdout.decode()
    module = types.ModuleType("grading_before")
    exec(compile(source, "grading_before.py", "exec"), module.__dict__)  # the repo's own old code

    def build(*args: Any, **kwargs: Any) -> GraderPayload:
        return GraderPayload("", module.build_payload(*args, **kwargs))

    return build


@contextmanager
def layout(before: bool) -> Iterator[None]:
    if not before:
        yield
        return
    with mock.patch.object(grading.middleware, "build_payload", old_build_payload()):
        yield


def fixed_tokens(before: bool) -> int:
    """Tokens up to the Anthropic breakpoint, counted as the stand-in counts them: the answer schema
    (tools come first), the system prompt and the payload's fixed part."""
    if before:
        return 0  # no breakpoint
    rubric = parse_rubric(RUBRIC)
    payload = build_payload(rubric, transcript(0, 0), iteration=0, calibration=EXAMPLES)
    schema = json.dumps([convert_to_openai_tool(grade_schema(rubric.kind, tuple(rubric.names)))])
    return len(f"{schema}\n{GRADER_SYSTEM_PROMPT}\n{payload.fixed}".split())


def fixed_part_shared(before: bool) -> float:
    """The share of the fixed part (schema, instructions, rubric, calibration) that lies inside the
    prefix two iterations of one run share, in stand-in tokens."""
    rubric = parse_rubric(RUBRIC)
    schema = json.dumps([convert_to_openai_tool(grade_schema(rubric.kind, tuple(rubric.names)))])
    build = old_build_payload() if before else build_payload
    first, second = (
        f"{schema}\n{GRADER_SYSTEM_PROMPT}\n"
        + build(rubric, transcript(0, n), iteration=n, calibration=EXAMPLES).text
        for n in (0, 1)
    )
    shared = 0
    for mine, theirs in zip(first.split(), second.split(), strict=False):
        if mine != theirs:
            break
        shared += 1
    return min(shared / fixed_tokens(before=False), 1.0)


def measure(base_url: str, runs: int, *, before: bool) -> Totals:
    os.environ["OPENAI_BASE_URL"] = base_url
    from langchain_openai import ChatOpenAI

    grader = TranscriptGrader(ChatOpenAI(model=OPENAI_MODEL[1], api_key="stand-in", max_retries=0))
    totals = Totals()
    breakpoint_tokens = fixed_tokens(before)
    written = False
    with layout(before):
        for run in range(runs):
            for iteration in range(2 + run % 2):
                evaluation = grader.grade(
                    RUBRIC, transcript(run, iteration), iteration=iteration, calibration=EXAMPLES
                )
                usage = evaluation["usage"] or {}
                totals.requests += evaluation["grader_calls"]
                totals.input_tokens += usage.get("input_tokens", 0)
                totals.output_tokens += usage.get("output_tokens", 0)
                totals.openai_cached += (usage.get("input_token_details") or {}).get("cache_read", 0)
                if breakpoint_tokens >= ANTHROPIC_MIN_CACHE:
                    if written:
                        totals.anthropic_cache_read += breakpoint_tokens
                    else:
                        totals.anthropic_cache_write += breakpoint_tokens
                        written = True
    return totals


def table(results: dict[str, Totals]) -> str:
    heads = [
        "Layout",
        "Fixed part shared",
        "Requests",
        "Input sent",
        "OpenAI cached",
        "Anthropic cached (read/write)",
    ]
    heads += [f"{OPENAI_MODEL[1]} USD", f"{ANTHROPIC_MODEL[1]} USD"]
    rows = [heads]
    for name, t in results.items():
        rows.append(
            [
                name,
                f"{fixed_part_shared(name == 'before'):.0%}",
                f"{t.requests}",
                f"{t.input_tokens:,}",
                f"{t.openai_cached:,} ({t.openai_cached / t.input_tokens:.0%})",
                f"{t.anthropic_cache_read:,} / {t.anthropic_cache_write:,}",
                f"{t.usd(OPENAI_MODEL):.4f}",
                f"{t.usd(ANTHROPIC_MODEL):.4f}",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(heads))]
    return "\n".join("  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args(argv)
    results: dict[str, Totals] = {}
    for name, before in (("before", True), ("after", False)):
        # A fresh stand-in per layout: nothing cached from the other one.
        with ModelProcess(CRITERIA, "unused", latency=0.0) as models:
            results[name] = measure(models.base_url, args.runs, before=before)
    print(f"A channel's {args.runs} runs of 2-3 grader iterations; 12 criteria, 5 calibration examples")
    print("(stand-in tokens: words; Anthropic: breakpoint after the fixed part, runs within its TTL)\n")
    print(table(results))
    out = ROOT / "benchmarks" / "results" / "cost.json"
    out.parent.mkdir(exist_ok=True)
    summary = {
        name: {
            **asdict(t),
            "openai_usd": t.usd(OPENAI_MODEL),
            "anthropic_usd": t.usd(ANTHROPIC_MODEL),
            "fixed_part_shared": fixed_part_shared(name == "before"),
        }
        for name, t in results.items()
    }
    out.write_text(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
