"""Grade a final answer on its own: the request it answers and the answer, nothing of the loop.

An independent check of a revise-and-grade loop (an audit grader) must not see what the loop's
grader saw besides the task: earlier drafts, the grader's feedback, tool calls and the team's
calibration examples would let it inherit the loop's blind spots. `answer_only` cuts a conversation
down to the current request (with any material shared for it) and the final answer; `agrade_answer`
and `grade_answer` grade that once with a `TranscriptGrader`, without calibration.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, AnyMessage

from grading.grader import request_index, turn_start
from grading.middleware import RubricEvaluation
from grading.once import TranscriptGrader


def answer_only(messages: Sequence[AnyMessage], answer: str) -> list[AnyMessage]:
    """The current request of `messages` (with the material shared for it), then `answer`.

    With no request in `messages`, the answer alone.
    """
    request = request_index(messages)
    task = [] if request is None else list(messages[turn_start(messages, request) : request + 1])
    return [*task, AIMessage(answer)]


async def agrade_answer(
    grader: TranscriptGrader, rubric: str, messages: Sequence[AnyMessage], answer: str
) -> RubricEvaluation:
    """`grader`'s evaluation of `answer` to the current request of `messages`, graded once against
    `rubric` as a first iteration, with no calibration; a grader failure is a `grader_error` result."""
    return await grader.agrade(rubric, answer_only(messages, answer), max_iterations=1)


def grade_answer(
    grader: TranscriptGrader, rubric: str, messages: Sequence[AnyMessage], answer: str
) -> RubricEvaluation:
    """Sync twin of `agrade_answer`."""
    return grader.grade(rubric, answer_only(messages, answer), max_iterations=1)
