"""The plan a run streams: one task per step of the revise-and-grade loop, as Slack's task chunks.

Each step completes the task before it and opens its own, so the plan reads like the loop: a draft
(naming what the worker read, each file a source),
a grading per iteration (with how many criteria it met), a revision after each failing one (naming
the criteria it fixes). A graded task's ``output`` is the verdict in a few words and its ``details``
the criteria failed or left to a person, with the grader's gaps. Criterion names and gaps come from
the rubric people wrote and the grader's words: they are shown as plain text, on one line each and
shortened (`TITLE_MAX`, `DETAILS_MAX`), never as markup.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slack_sdk.models.blocks import UrlSourceElement
from slack_sdk.models.messages.chunk import Chunk, PlanUpdateChunk, TaskUpdateChunk

from bot.slack.blocks import plural
from bot.slack.mrkdwn import truncate
from grading import RubricEvaluation

PLAN_TITLE = "Answering, then grading the answer against the rubric"
"""The title of the plan above the tasks."""

TITLE_MAX = 200
"""Longest task title: a revision names its failing criteria, which a rubric can make long."""

DRAFT_TASK = "draft"
"""Task id of the worker's first answer."""

DRAFTING = "Writing a draft"
"""Title of the draft task."""

GRADING = "Grading iteration {position}"
"""Title of a grading task while it runs; ``position`` reads like ``2/3``."""

GRADED = "Grading iteration {position}: {result}"
"""Title of a grading task once graded; ``result`` like ``3 of 5 criteria met`` or ``all met``, with
``, 1 can't tell`` when the grader left criteria to a person."""

REVISING = "Revising: {criteria}"
"""Title of a revision task, naming the criteria the grader failed."""

OUTPUTS = {
    "satisfied": "Passed: the rubric is satisfied",
    "needs_revision": "Needs revision",
    "max_iterations_reached": "Not passed, and no tries left",
    "failed": "Failed",
    "grader_error": "The grader failed",
}
"""A graded task's ``output``: the iteration's verdict in a few words, by its result."""

DETAILS_MAX = 1000
"""Longest ``details`` of a graded task (the failing and can't-tell criteria with their gaps): the
plan is a summary, the iteration's own message holds every word."""

DETAIL_LINE_MAX = 200
"""Longest line of ``details``, one criterion and its gap, so one long gap leaves room for others."""


@dataclass
class Plan:
    """The plan of one run, one task in progress at a time."""

    _open: TaskUpdateChunk | None = None

    def start(self) -> list[Chunk]:
        """The plan's title and its first task: the worker writing a draft."""
        return [PlanUpdateChunk(title=PLAN_TITLE), *self._next(DRAFT_TASK, DRAFTING)]

    def reading(self, files: Sequence[tuple[str, str | None]], thread_messages: int) -> list[Chunk]:
        """The draft task names what the worker read: `thread_messages` earlier messages of the
        thread and `files` (name, URL), each file with a URL a source; nothing once the draft is done."""
        if self._open is None or self._open.id != DRAFT_TASK or not (files or thread_messages):
            return []
        read = []
        if thread_messages:
            read.append(f"{plural(thread_messages, 'earlier message')} of this thread")
        if files:
            read.append(f"{plural(len(files), 'file')}: " + ", ".join(name for name, _ in files))
        sources = [UrlSourceElement(url=url, text=_one_line(name)) for name, url in files if url]
        self._open = TaskUpdateChunk(
            id=DRAFT_TASK,
            title=self._open.title,
            status="in_progress",
            details=truncate("Read " + " and ".join(read), DETAILS_MAX),
            sources=sources or None,
        )
        return [self._open]

    def grading(self, iteration: int, max_iterations: int) -> list[Chunk]:
        """The grader is checking iteration `iteration` (0-based) of `max_iterations`."""
        return self._next(
            _grading_id(iteration), GRADING.format(position=_position(iteration, max_iterations))
        )

    def graded(self, evaluation: RubricEvaluation) -> list[Chunk]:
        """The grader's result for an iteration: its task completed, saying how many criteria were met."""
        position = _position(evaluation["iteration"], evaluation["max_iterations"])
        task = TaskUpdateChunk(
            id=_grading_id(evaluation["iteration"]),
            title=_one_line(GRADED.format(position=position, result=_result(evaluation))),
            status="error" if evaluation["result"] == "grader_error" else "complete",
            output=OUTPUTS.get(evaluation["result"], evaluation["result"]),
            details=_details(evaluation),
        )
        self._open = None
        return [task]

    def revising(self, evaluation: RubricEvaluation) -> list[Chunk]:
        """The worker is revising after `evaluation`, to fix the criteria it failed."""
        failing = ", ".join(
            c["name"] for c in evaluation["criteria"] if not c["passed"] and not c.get("cannot_tell")
        )
        return self._next(
            f"revise-{evaluation['iteration'] + 1}",
            REVISING.format(criteria=failing or "the grader's feedback"),
        )

    def close(self) -> list[Chunk]:
        """The run is over: the task still in progress (if any) is completed."""
        if self._open is None:
            return []
        opened = self._open
        done = TaskUpdateChunk(
            id=opened.id,
            title=opened.title,
            status="complete",
            details=opened.details,
            sources=opened.sources,
        )
        self._open = None
        return [done]

    def _next(self, task_id: str, title: str) -> list[Chunk]:
        """Complete the open task and open `task_id`."""
        closed = self.close()
        self._open = TaskUpdateChunk(id=task_id, title=_one_line(title), status="in_progress")
        return [*closed, self._open]


def _grading_id(iteration: int) -> str:
    return f"grade-{iteration + 1}"


def _position(iteration: int, max_iterations: int) -> str:
    return f"{iteration + 1}/{max_iterations}"


def _result(evaluation: RubricEvaluation) -> str:
    """How an iteration did, in a few words."""
    if evaluation["result"] == "grader_error":
        return "the grader failed"
    # A criterion the grader could not tell is a person's call, neither met nor missed (as the
    # iteration message and the run's status count it).
    judged = [c for c in evaluation["criteria"] if not c.get("cannot_tell")]
    open_ = len(evaluation["criteria"]) - len(judged)
    met = sum(1 for c in judged if c["passed"])
    result = "all met" if judged and met == len(judged) else f"{met} of {len(judged)} criteria met"
    return f"{result}, {open_} can't tell" if open_ else result


def _details(evaluation: RubricEvaluation) -> str | None:
    """The criteria the grader failed or could not tell, each with its gap, as plain text lines
    (None when every criterion passed)."""
    lines = [
        _one_line(
            f"{'Can’t tell' if c.get('cannot_tell') else 'Failed'}: {c['name']} — {c['gap']}", DETAIL_LINE_MAX
        )
        for c in evaluation["criteria"]
        if c.get("cannot_tell") or not c["passed"]
    ]
    return truncate("\n".join(lines), DETAILS_MAX) if lines else None


def _one_line(title: str, limit: int = TITLE_MAX) -> str:
    """`title` on one line, shortened to `limit`."""
    return truncate(" ".join(title.split()), limit)
