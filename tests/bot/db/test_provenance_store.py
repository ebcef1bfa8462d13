"""Provenance stored with each evaluation, on SQLite and PostgreSQL (each test runs on both)."""

from __future__ import annotations

import pytest

from bot.db.evaluations import PostedEvaluation
from bot.db.store import Store
from bot.limits.prices import run_cost
from bot.vocabulary.provenance import UNKNOWN, stored_provenance
from bot.vocabulary.thread import ThreadKey
from bot.vocabulary.workspace import Workspace
from grading import text_hash

T1 = Workspace("T1")
THREAD = ThreadKey("T1", "C1", "1.0")
RUBRIC, OTHER = "- Be brief", "- Be kind"


def evaluation(run: str, rubric: str) -> dict:
    engine = {
        "rubric_hash": text_hash(rubric),
        "grader_model": "grader-2026-01-01",
        "grader_prompt_hash": "abc",
        "calibration_examples": ["r1"],
        "worker_model": None,
    }
    return {
        "grading_run_id": run,
        "iteration": 0,
        "result": "satisfied",
        "criteria": [],
        "provenance": engine,
    }


async def post(store: Store, run: str, rubric: str, ts: str) -> int:
    """Start a run that posts its evaluation as message `ts`; the run's id."""
    run_id = await store.start_run(THREAD, ts)
    shown = evaluation(run, rubric)
    await store.record_posted(
        run_id, 0, 0, ts, PostedEvaluation(THREAD, shown, rubric, stored_provenance(shown))
    )
    return run_id


async def test_an_evaluation_is_stored_with_its_channel_rubric_version_or_its_hash(store):
    await store.set_channel_rubric(T1, "C1", OTHER, "U1")
    await store.set_channel_rubric(T1, "C1", RUBRIC, "U1")
    await post(store, "run-1", RUBRIC, "2.0")
    await post(store, "run-2", "- A thread's own", "3.0")
    await store.save_evaluation(THREAD, "4.0", evaluation("run-3", RUBRIC), RUBRIC)  # as before provenance

    records = {r.grading_run_id: r for r in [r async for r in store.evaluation_records(T1, "C1")]}

    first = records["run-1"].provenance
    assert first is not None
    assert (first["rubric_version"], first["grader_model"], first["calibration_examples"]) == (
        "v2",
        "grader-2026-01-01",
        ["r1"],
    )
    assert first["worker_model"] == UNKNOWN and first["bot_version"] != ""
    assert records["run-2"].provenance["rubric_version"] == "#" + text_hash("- A thread's own")
    old = records["run-3"].provenance
    assert old["rubric_version"] == old["grader_model"] == old["bot_version"] == UNKNOWN


async def test_evaluations_are_walked_in_order_across_batches(store, monkeypatch):
    monkeypatch.setattr("bot.db.evaluations.EXPORT_BATCH", 2)
    for number in range(5):
        await post(store, f"run-{number}", RUBRIC, f"{number + 2}.0")

    walked = [r.grading_run_id async for r in store.evaluation_records(T1, "C1")]

    assert walked == [f"run-{number}" for number in range(5)]


async def test_an_export_reads_each_evaluations_run_cost_once_the_run_ended_across_batches(
    store, monkeypatch
):
    monkeypatch.setattr("bot.db.evaluations.EXPORT_BATCH", 2)
    spent = {"input_tokens": 1_000, "output_tokens": 100, "total_tokens": 1_100}
    cost = run_cost({"worker": ("openai:gpt-4o-mini", spent), "grader": ("openai:gpt-4o", spent)})
    priced, not_priced, _going = [await post(store, f"run-{n}", RUBRIC, f"{n + 2}.0") for n in range(3)]
    await store.finish_run(priced, "satisfied", tokens=2_200, cost=cost)
    await store.finish_run(not_priced, "satisfied", tokens=2_200)  # no pricing configured: no cost

    exported = {
        r.grading_run_id: r.run_cost async for r in store.evaluation_records(T1, "C1", with_cost=True)
    }
    plain = [r.run_cost async for r in store.evaluation_records(T1, "C1")]

    recorded = exported["run-0"]
    assert recorded is not None and recorded.usd == pytest.approx(cost.usd) and not recorded.unpriced
    assert recorded.token_usage["grader"]["model"] == "openai:gpt-4o"
    assert recorded.token_usage["worker"]["input_tokens"] == 1_000
    assert exported["run-1"] is None and exported["run-2"] is None  # no cost recorded; still going
    assert plain == [None, None, None]  # the cost is read for an export only
