"""Replaying reviewed iterations: rebuilt grader input, calibration modes, and the comparison's numbers.

The database is seeded as the bot fills it (see tests/bot/agreement/replay_seed.py); the replayed grader is a
scripted model that agrees with the team on "Is polite" only when shown a team example about the
same topic, so leave-one-out calibration beats none by a known amount.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from sklearn.metrics import cohen_kappa_score

from bot.agreement.comparison import Comparison, compare
from bot.agreement.replay import Case, Regrade, attach_transcripts, load_cases, regrade
from bot.db.store import Store
from bot.material.reader import FileText, Material, conversation_messages
from bot.material.thread import EarlierThread
from grading.once import TranscriptGrader
from tests.bot.agreement.replay_seed import (
    IMPOLITE,
    REVIEWED_FIRST_DRAFTS,
    TOPICS,
    replayed_grader,
    sections,
    seed,
    topic_of,
)
from tests.grading.scripted import ScriptedChatModel, payload_of


@dataclass
class Seeded:
    store: Store
    checkpointer: AsyncSqliteSaver
    original: ScriptedChatModel


@pytest.fixture
async def seeded(tmp_path: Path) -> AsyncIterator[Seeded]:
    path = tmp_path / "bot.sqlite"
    original = await seed(path)
    store = await Store.open(str(path))
    async with AsyncSqliteSaver.from_conn_string(str(path)) as checkpointer:
        yield Seeded(store, checkpointer, original)
    await store.close()


async def replay(seeded: Seeded, calibration: str) -> tuple[list[Case], list[Regrade], ScriptedChatModel]:
    model = ScriptedChatModel(script=replayed_grader)
    cases, skipped = await attach_transcripts(seeded.checkpointer, await load_cases(seeded.store))
    assert skipped == []
    done: list[Regrade] = []
    await regrade(
        cases, TranscriptGrader(model), calibration, seeded.store, concurrency=4, on_graded=done.append
    )
    return cases, done, model


def comparison(cases: list[Case], before: list[Regrade], after: list[Regrade]) -> Comparison:
    return compare(
        cases,
        {r.case.key: r.verdicts for r in before},
        {r.case.key: r.verdicts for r in after},
        labels=("before", "after"),
        planned=len(cases),
    )


def row(result: Comparison, name: str):
    return next(r for r in [*result.criteria, *result.overall] if r.criterion == name)


def graded(payload: str) -> tuple[int, int, bool]:
    """Which thread's which iteration a grader payload is about, and whether after the follow-up."""
    transcript = sections(payload)["transcript"]
    thread = int(re.search(r"Request (\d+)", transcript).group(1))
    iteration = int(re.search(r"Grading iteration (\d+)\.", payload).group(1))
    return thread, iteration, "Follow-up" in transcript


async def test_the_replayed_transcript_is_the_one_the_grader_saw(seeded):
    at_the_time = {graded(p): sections(p)["transcript"] for p in map(payload_of, seeded.original.calls)}
    _, _, model = await replay(seeded, "on")
    replayed = {graded(p): sections(p)["transcript"] for p in map(payload_of, model.calls)}

    reviewed = {(i, 1, False) for i in range(len(TOPICS))} | {(i, 0, False) for i in REVIEWED_FIRST_DRAFTS}
    assert set(replayed) == reviewed  # the follow-up in thread 0 came later and is in none of them
    assert replayed == {key: at_the_time[key] for key in reviewed}


async def test_leave_one_out_calibration_beats_none_by_the_known_amount(seeded):
    cases, off, _ = await replay(seeded, "off")
    _, loo, model = await replay(seeded, "loo")
    result = comparison(cases, off, loo)

    # The team's Is-polite verdicts, one per reviewed iteration: 5 fails, then 7 + 7 passes.
    team = [False] * IMPOLITE + [True] * (len(TOPICS) - IMPOLITE) + [True] * len(REVIEWED_FIRST_DRAFTS)
    without = [True] * len(team)  # never shown an example, the grader always passes it
    with_twin = [False] * 4 + [True] * (len(team) - 4)  # topic D has no twin to learn from
    polite = row(result, "Is polite")
    assert polite.n == len(team) == 19
    assert polite.before.percent_agreement == pytest.approx(14 / 19)
    assert polite.after.percent_agreement == pytest.approx(18 / 19)
    assert polite.before.kappa == pytest.approx(cohen_kappa_score(team, without)) == 0
    assert polite.after.kappa == pytest.approx(cohen_kappa_score(team, with_twin))
    low, high = polite.kappa_interval
    assert 0 < low <= polite.kappa_difference <= high
    # Flips: the four cases with a twin now match the team; nothing else moved.
    assert (
        sorted((f.criterion, f.before, f.after, f.effect) for f in result.flips)
        == [("Is polite", "pass", "fail", "fixed")] * 4
    )
    # Leave-one-out never shows a case its own review, only its twin's (topic D has none).
    for payload in map(payload_of, model.calls):
        topic = topic_of(sections(payload)["transcript"])
        twins = {"A": 1, "B": 1}.get(topic, 0)
        assert sections(payload).get("comments", "").count(f"topic-{topic}") == twins


async def test_a_case_whose_transcript_holds_shared_material_says_so(seeded):
    cases, _ = await attach_transcripts(seeded.checkpointer, await load_cases(seeded.store))
    plain = cases[0]
    shared = Material(thread=None, files=(FileText("spec.md", "# Spec"),), unread=())
    with_file = replace(plain, messages=(*conversation_messages("review it", shared, "r1"), *plain.messages))
    thread = Material(thread=EarlierThread("[2025-01-01 00:00 UTC] Ana: hi", 1, 0), files=(), unread=())
    with_thread = replace(plain, messages=(*conversation_messages("sum up", thread, "r2"), *plain.messages))

    assert not any(case.shares_material for case in cases)
    assert with_file.shares_material and with_thread.shares_material
