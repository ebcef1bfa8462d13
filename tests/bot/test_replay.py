"""Replaying reviewed iterations: rebuilt grader input, calibration modes, and the comparison's numbers.

The seeded database is made the way the bot makes it: the real agent (langchain + RubricMiddleware)
with scripted models answers requests in threads checkpointed in the SQLite file, each evaluation is
saved as the runner saves it, and a teammate reviews them. The replayed grader is a scripted model
that agrees with the team on "Is polite" only when a team example about the same topic is in its
prompt, so leave-one-out calibration beats none by a known amount.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite
import pytest
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from sklearn.metrics import cohen_kappa_score

from bot.agent import agent_config, build_agent, run_turn
from bot.conversation import thread_id
from bot.replay import Case, Regrade, attach_transcripts, load_cases, regrade
from bot.replay_report import Comparison, compare
from bot.store import ReviewVerdict, Store
from grading.once import TranscriptGrader
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

RUBRIC = "- Cites a source\n- Is polite"
TEAM, CHANNEL = "T1", "C1"
TOPICS = ["A", "A", "B", "B", "D", "Z", "Z", "Z", "Z", "Z", "Z", "Z"]
"""Topic of each seeded thread. The team overruled the grader on "Is polite" for the first five
(A, A, B, B, D): topics A and B have a twin whose review can teach the grader, D has none."""
IMPOLITE = 5
"""Threads 0–4: the team judged "Is polite" failed where the grader passed it."""
REVIEWED_FIRST_DRAFTS = range(5, 12)
"""Threads whose first iteration (the draft) was reviewed too, agreeing with the grader."""

_SECTION = re.compile(r"<(transcript|calibration)-[0-9a-f]+>\n(.*?)\n</\1-[0-9a-f]+>", re.DOTALL)


def sections(payload: str) -> dict[str, str]:
    """The transcript and calibration sections of a grader payload, without their nonce tags."""
    return {name: body for name, body in _SECTION.findall(payload)}


def topic_of(text: str) -> str:
    return re.search(r"topic-(\w)", text).group(1)


def worker_script(messages: list[BaseMessage]) -> str:
    requests = [m.text for m in messages if m.type == "human" and "Grader feedback" not in m.text]
    revising = "Grader feedback" in messages[-1].text
    return f"{'Revised' if revising else 'Draft'} answer on topic-{topic_of(requests[-1])}"


def verdicts_of(payload: str, *, polite: bool) -> dict:
    transcript = sections(payload)["transcript"]
    cites = transcript.rfind("Revised answer") > transcript.rfind("Draft answer")
    criteria = [
        {"name": "Cites a source", "passed": cites, "gap": "" if cites else "Cite a source."},
        {"name": "Is polite", "passed": polite, "gap": "" if polite else "Greet the reader."},
    ]
    result = "satisfied" if cites and polite else "needs_revision"
    return grade_call("RubricGrade", {"result": result, "explanation": "Graded.", "criteria": criteria})


def original_grader(messages: list[BaseMessage]):
    """The grader at the time: cites a source once revised, always finds the answer polite."""
    return verdicts_of(payload_of(messages), polite=True)


def calibrated_grader(messages: list[BaseMessage]):
    """The replayed grader: fails "Is polite" only when shown a team example about the same topic."""
    payload = payload_of(messages)
    topic = topic_of(sections(payload)["transcript"])
    examples = sections(payload).get("calibration", "")
    taught = any("'Is polite'" in line and f"topic-{topic}" in line for line in examples.splitlines())
    return verdicts_of(payload, polite=not taught)


@dataclass
class Seeded:
    store: Store
    checkpointer: AsyncSqliteSaver
    original: ScriptedChatModel
    evaluations: dict[str, list[dict]] = field(default_factory=dict)
    """Thread root ts → its evaluations, in order."""


async def ask(agent, store: Store, root: str, text: str, into: list[dict], rubric: str | None = None) -> None:
    async def save(evaluation: dict) -> None:
        into.append(evaluation)
        message_ts = f"{root}.{len(into)}"
        await store.save_evaluation(TEAM, CHANNEL, root, message_ts, evaluation, RUBRIC)

    inputs = {"messages": [HumanMessage(text)], **({"rubric": rubric} if rubric else {})}
    await run_turn(agent, inputs, agent_config(thread_id(TEAM, CHANNEL, root)), save)


def review(name: str, grader: str, team: str, comment: str = "") -> ReviewVerdict:
    return ReviewVerdict(name, grader, team, comment)


@pytest.fixture
async def seeded(tmp_path: Path) -> AsyncIterator[Seeded]:
    path = str(tmp_path / "bot.sqlite")
    store = await Store.open(path)
    async with aiosqlite.connect(path) as connection:
        checkpointer = AsyncSqliteSaver(connection)
        original = ScriptedChatModel(script=original_grader)
        agent = build_agent(
            ScriptedChatModel(script=worker_script), original, max_iterations=3, checkpointer=checkpointer
        )
        seeded = Seeded(store, checkpointer, original)
        for i, topic in enumerate(TOPICS):
            root = f"100.{i}"
            found = seeded.evaluations.setdefault(root, [])
            await ask(agent, store, root, f"Request {i} about topic-{topic}", found, rubric=RUBRIC)
            draft, final = found
            polite = "fail" if i < IMPOLITE else "pass"
            comment = f"topic-{topic} answers must greet the reader" if i < IMPOLITE else ""
            await store.save_review(
                TEAM, CHANNEL, root, final["grading_run_id"], 1, "U1",
                [review("Cites a source", "pass", "pass"), review("Is polite", "pass", polite, comment)],
            )  # fmt: skip
            if i in REVIEWED_FIRST_DRAFTS:
                await store.save_review(
                    TEAM, CHANNEL, root, draft["grading_run_id"], 0, "U1",
                    [review("Cites a source", "fail", "fail"), review("Is polite", "pass", "pass")],
                )  # fmt: skip
        # A later request in the first thread: its history grows past the reviewed iterations.
        await ask(agent, store, "100.0", "Follow-up about topic-A", seeded.evaluations["100.0"])
        yield seeded
    await store.close()


async def replay(seeded: Seeded, calibration: str) -> tuple[list[Case], list[Regrade], ScriptedChatModel]:
    model = ScriptedChatModel(script=calibrated_grader)
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
        assert sections(payload).get("calibration", "").count(f"topic-{topic}") == twins
