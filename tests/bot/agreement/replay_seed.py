"""A bot database of reviewed iterations, made the way the bot makes one, for the replay tests.

The real agent (langchain + RubricMiddleware) with scripted models answers one request in each of
twelve threads, checkpointed in the SQLite file; each evaluation is saved as the runner saves it
and a teammate reviews them. Each thread's request is about a topic, and the team overruled the
grader on "Is polite" in the first five threads (topics A, A, B, B, D), with a comment naming the
topic. The replayed grader (:func:`replayed_grade`) fails "Is polite" only when a team example
about the transcript's topic is in its prompt: A and B each have a twin to learn from, D has none.
"""

from __future__ import annotations

import re
from pathlib import Path

import aiosqlite
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from bot.agent.turn import run_turn
from bot.agent.worker import agent_config, build_agent
from bot.db.reviews import ReviewVerdict
from bot.db.store import Store
from bot.vocabulary.thread import ThreadKey, thread_id
from bot.vocabulary.workspace import Workspace
from tests.grading.scripted import ScriptedChatModel, grade_call, payload_of

RUBRIC = "- Cites a source\n- Is polite"
TEAM, CHANNEL = "T1", "C1"
TOPICS = ["A", "A", "B", "B", "D", "Z", "Z", "Z", "Z", "Z", "Z", "Z"]
"""Topic of each seeded thread's request."""
IMPOLITE = 5
"""Threads 0–4: the team judged "Is polite" failed where the grader passed it."""
REVIEWED_FIRST_DRAFTS = range(5, 12)
"""Threads whose first iteration (the draft) was reviewed too, agreeing with the grader."""
CASES = len(TOPICS) + len(REVIEWED_FIRST_DRAFTS)
"""Reviewed iterations in the database."""

_SECTION = re.compile(r"<(transcript|calibration|comments)-[0-9a-f]+>\n(.*?)\n</\1-[0-9a-f]+>", re.DOTALL)


def sections(payload: str) -> dict[str, str]:
    """The transcript, calibration and comments sections of a grader payload, without their nonce tags."""
    return {name: body for name, body in _SECTION.findall(payload)}


def topic_of(text: str) -> str:
    return re.search(r"topic-(\w)", text).group(1)


def worker_script(messages: list[BaseMessage]) -> str:
    requests = [m.text for m in messages if m.type == "human" and "Grader feedback" not in m.text]
    revising = "Grader feedback" in messages[-1].text
    return f"{'Revised' if revising else 'Draft'} answer on topic-{topic_of(requests[-1])}"


def grade(payload: str, *, polite: bool) -> dict:
    """The grade: a source is cited once the answer is revised; politeness as given."""
    transcript = sections(payload)["transcript"]
    cites = transcript.rfind("Revised answer") > transcript.rfind("Draft answer")
    criteria = [
        {"name": "Cites a source", "passed": cites, "gap": "" if cites else "Cite a source."},
        {"name": "Is polite", "passed": polite, "gap": "" if polite else "Greet the reader."},
    ]
    result = "satisfied" if cites and polite else "needs_revision"
    return {"result": result, "explanation": "Graded.", "criteria": criteria}


def taught(payload: str) -> bool:
    """Whether the payload shows a team example on "Is polite" whose reviewer's remark is about
    the transcript's topic (remarks sit in their own untrusted section, one paragraph each)."""
    topic = topic_of(sections(payload)["transcript"])
    remarks = sections(payload).get("comments", "").split("\n\n")
    return any("Is polite" in remark and f"topic-{topic}" in remark for remark in remarks)


def replayed_grade(payload: str) -> dict:
    """The replayed grader: fails "Is polite" only when taught to by a team example."""
    return grade(payload, polite=not taught(payload))


def original_grader(messages: list[BaseMessage]):
    """The grader at the time: always finds the answer polite."""
    return grade_call("RubricGrade", grade(payload_of(messages), polite=True))


def replayed_grader(messages: list[BaseMessage]):
    return grade_call("RubricGrade", replayed_grade(payload_of(messages)))


async def _ask(agent, store: Store, root: str, text: str, into: list[dict], rubric: str | None = None):
    async def save(evaluation: dict) -> None:
        into.append(evaluation)
        await store.save_evaluation(ThreadKey(TEAM, CHANNEL, root), f"{root}.{len(into)}", evaluation, RUBRIC)

    inputs = {"messages": [HumanMessage(text)], **({"rubric": rubric} if rubric else {})}
    await run_turn(agent, inputs, agent_config(thread_id(Workspace(TEAM), CHANNEL, root)), save)


def _review(name: str, grader: str, team: str, comment: str = "") -> ReviewVerdict:
    return ReviewVerdict(name, grader, team, comment)


async def seed(path: Path) -> ScriptedChatModel:
    """Fill the database at ``path``; the original grader, whose calls hold what it was shown."""
    store = await Store.open(str(path))
    original = ScriptedChatModel(script=original_grader)
    try:
        async with aiosqlite.connect(str(path)) as connection:
            worker = ScriptedChatModel(script=worker_script)
            agent = build_agent(worker, original, max_iterations=3, checkpointer=AsyncSqliteSaver(connection))
            first_thread: list[dict] = []
            for i, topic in enumerate(TOPICS):
                root = f"100.{i}"
                found: list[dict] = [] if i else first_thread
                await _ask(agent, store, root, f"Request {i} about topic-{topic}", found, rubric=RUBRIC)
                draft, final = found
                polite = "fail" if i < IMPOLITE else "pass"
                comment = f"topic-{topic} answers must greet the reader" if i < IMPOLITE else ""
                verdicts = [
                    _review("Cites a source", "pass", "pass"),
                    _review("Is polite", "pass", polite, comment),
                ]
                # A reviewer (an editor) per request: a person makes one example per criterion in force.
                await store.save_review(
                    ThreadKey(TEAM, CHANNEL, root), final["grading_run_id"], 1, f"U{i}", verdicts, editor=True
                )
                if i in REVIEWED_FIRST_DRAFTS:
                    await store.save_review(
                        ThreadKey(TEAM, CHANNEL, root), draft["grading_run_id"], 0, "U1",
                        [_review("Cites a source", "fail", "fail"), _review("Is polite", "pass", "pass")],
                    )  # fmt: skip
            # A later request in the first thread: its history grows past the reviewed iterations.
            await _ask(agent, store, "100.0", "Follow-up about topic-A", first_thread)
    finally:
        await store.close()
    return original
