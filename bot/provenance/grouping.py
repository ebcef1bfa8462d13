"""What produced a group of verdicts, in words, and what the grader left to people.

What produced a verdict is labelled by its rubric version and grader model (the agreement report
pools each criterion over the versions in which its text is unchanged: `bot.agreement.pooling`).
The reports also say how much the grader judged (coverage) and which criteria it could not tell
still wait for a person's verdict; once someone reviews such a criterion, it is theirs and waits
no more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.slack.blocks import plural
from bot.vocabulary.provenance import UNKNOWN, EvaluationProvenance
from bot.vocabulary.thread import ThreadKey
from grading import RubricEvaluation, abstained


def provenance_label(provenance: EvaluationProvenance | None) -> str:
    """E.g. ``rubric v3 · grader gpt-4o-mini-2024-07-18``: what a group of verdicts came from."""
    version = provenance["rubric_version"] if provenance else UNKNOWN
    model = provenance["grader_model"] if provenance else UNKNOWN
    return f"rubric {version} · grader {model}"


def provenance_counts(labels: Iterable[str]) -> str:
    """E.g. ``rubric v1 · grader gpt-4o-mini-2024-07-18 (3 cases); rubric v2 · … (1 case)``."""
    counted = Counter(labels)
    return "; ".join(f"{label} ({plural(count, 'case')})" for label, count in counted.items())


@dataclass(frozen=True)
class Coverage:
    """How many criteria the grader judged of all it was asked to grade."""

    judged: int
    total: int

    @property
    def share(self) -> float | None:
        """judged ÷ total; None when nothing was graded."""
        return self.judged / self.total if self.total else None


def coverage(evaluations: Iterable[RubricEvaluation]) -> Coverage:
    """The grader's coverage over `evaluations`: criteria judged (not "can't tell") of all."""
    judged = total = 0
    for evaluation in evaluations:
        total += len(evaluation["criteria"])
        judged += len(evaluation["criteria"]) - len(abstained(evaluation))
    return Coverage(judged, total)


@dataclass(frozen=True)
class Waiting:
    """An iteration with criteria the grader could not tell that nobody has reviewed yet."""

    thread: ThreadKey
    message_ts: str
    iteration: int
    criteria: list[str]


def waiting_for_people(records: Iterable[EvaluationRecord], reviews: Sequence[ReviewRow]) -> list[Waiting]:
    """The iterations, oldest first, whose abstained criteria nobody has given a verdict on."""
    reviewed = {(r.grading_run_id, r.iteration, r.criterion) for r in reviews}
    found = []
    for record in records:
        open_ = [
            name
            for name in abstained(record.evaluation)
            if (record.grading_run_id, record.iteration, name) not in reviewed
        ]
        if open_:
            found.append(Waiting(record.thread, record.message_ts, record.iteration, open_))
    return found
