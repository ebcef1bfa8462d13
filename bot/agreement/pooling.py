"""A criterion's verdicts pooled across rubric versions while its text is unchanged, per grader model.

A rubric edit that adds or reorders criteria does not change what an unchanged criterion asks, so its
reviews and gradings under every version where its text (normalized) is the same are one criterion's
evidence, kept apart only by the grader model that gave the verdicts. A criterion whose text changed
starts afresh: it is another criterion, "since v4 (text changed)". The report, and anything else that
judges the grader per criterion (trust thresholds, say), reads :func:`pooled_criteria`; a replay,
which compares two graders on the same reviews, groups them by name with :func:`rows_by_criterion`.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from bot.agreement.presentation import LIST_KIND, SCORED_KIND
from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.review.verdicts import is_judged, verdict_label
from bot.vocabulary.provenance import UNKNOWN
from grading.rubric import Dimension, Rubric, RubricError, normalize_name, parse_rubric

Kind = Literal["list", "scored"]
"""A pass/fail criterion's or a scored dimension's."""

Change = Literal["text changed", "added"]
"""Why a criterion's figures start at a later version of the window: its text was rewritten (the
earlier text is another line) or it was added to the rubric."""

RUBRICS_CACHED = 64
"""Parsed rubric texts kept: a window holds few versions, each on many evaluations."""


@dataclass(frozen=True)
class CriterionKey:
    """What one pooled criterion is: its kind, its normalized text and the grader model that judged it."""

    kind: Kind
    text: str
    grader_model: str


@dataclass(frozen=True)
class RunCoverage:
    """How many of one graded run's verdicts on the criterion the grader judged (not "can't tell")."""

    grading_run_id: str
    judged: int
    total: int


@dataclass(frozen=True)
class Withheld:
    """A verdict the grader gave and a trust threshold withheld (`CriterionResult.withheld_passed`)."""

    passed: bool
    confidence: float


@dataclass(frozen=True)
class Graded:
    """One criterion of one evaluation as pooling reads it."""

    name: str
    """As the rubric spells it."""
    confidence: float | None
    """The grader's confidence in its verdict; None where it could not tell (or it was withheld)."""
    withheld: Withheld | None


@dataclass
class PooledCriterion:
    """One criterion's evidence in a window: its reviews of judged verdicts, its coverage by run, and
    the rubric versions pooled."""

    key: CriterionKey
    name: str
    """As the latest rubric in the window spells it."""
    versions: list[str] = field(default_factory=list)
    """The rubric versions pooled (``v3``, or ``#`` and a thread rubric's hash), oldest first."""
    since: str | None = None
    """The version its figures start at, when the window holds earlier versions without it."""
    change: Change | None = None
    """Why it starts at `since`."""
    reviews: list[ReviewRow] = field(default_factory=list)
    """Reviews of verdicts the grader judged (a "can't tell" has nothing to agree with)."""
    coverage: dict[str, RunCoverage] = field(default_factory=dict)
    """By grading run id."""
    confidences: dict[tuple[str, int], float | None] = field(default_factory=dict)
    """The grader's confidence in each of its verdicts, by grading run id and iteration (1 for one
    stored before confidences were); None where it could not tell."""
    withheld: dict[tuple[str, int], Withheld] = field(default_factory=dict)
    """The verdicts a trust threshold withheld (left to people as "can't tell"), by grading run id
    and iteration: what the grader said, and how sure it was."""
    withheld_reviews: list[ReviewRow] = field(default_factory=list)
    """Reviews of the `withheld` verdicts: evidence on what the grader said under its threshold,
    which the thresholds calibrate on (they are not in `reviews`: nothing was acted on to agree with)."""

    @property
    def judged(self) -> int:
        return sum(c.judged for c in self.coverage.values())

    @property
    def graded(self) -> int:
        return sum(c.total for c in self.coverage.values())


def pooled_criteria(
    reviews: Iterable[ReviewRow], records: Sequence[EvaluationRecord]
) -> list[PooledCriterion]:
    """Each criterion of the window's evaluations (`records`, oldest first) with its reviews, in order of
    first grading; a review of an evaluation outside `records` pools by the criterion's name under an
    unknown grader model."""
    pooled: dict[CriterionKey, PooledCriterion] = {}
    keys: dict[tuple[str, int, str], CriterionKey] = {}
    history: dict[str, list[tuple[str, list[CriterionKey]]]] = {}
    for record in records:
        version, model = _version_and_model(record)
        found = _criteria_keys(record, model)
        versions = history.setdefault(model, [])
        if not versions or versions[-1][0] != version:
            versions.append((version, [key for key, _ in found]))
        for key, graded in found:
            name, judged = graded.name, graded.confidence is not None
            item = pooled.setdefault(key, PooledCriterion(key, name))
            item.confidences[(record.grading_run_id, record.iteration)] = graded.confidence
            if graded.withheld:
                item.withheld[(record.grading_run_id, record.iteration)] = graded.withheld
            item.name = name
            if version not in item.versions:
                item.versions.append(version)
            run = item.coverage.get(record.grading_run_id, RunCoverage(record.grading_run_id, 0, 0))
            item.coverage[record.grading_run_id] = RunCoverage(
                record.grading_run_id, run.judged + judged, run.total + 1
            )
            keys[(record.grading_run_id, record.iteration, normalize_name(name))] = key
    for row in reviews:
        known = keys.get((row.grading_run_id, row.iteration, normalize_name(row.criterion)))
        if not is_judged(row.grader_verdict):
            if known and (row.grading_run_id, row.iteration) in pooled[known].withheld:
                pooled[known].withheld_reviews.append(row)
            continue
        key = known or _unknown_key(row)
        pooled.setdefault(key, PooledCriterion(key, row.criterion, [UNKNOWN])).reviews.append(row)
    for versions in history.values():
        _mark_starts(pooled, versions)
    return list(pooled.values())


def _version_and_model(record: EvaluationRecord) -> tuple[str, str]:
    provenance = record.provenance
    return (provenance["rubric_version"], provenance["grader_model"]) if provenance else (UNKNOWN, UNKNOWN)


def _criteria_keys(record: EvaluationRecord, model: str) -> list[tuple[CriterionKey, Graded]]:
    """Each graded criterion's key, with its name as the rubric spells it, the grader's confidence
    in its verdict and the verdict a trust threshold withheld."""
    evaluation = record.evaluation
    kind: Kind = "scored" if evaluation["kind"] == "scored" else "list"
    rubric = _parsed(record.rubric_text)
    found: dict[CriterionKey, Graded] = {}
    for criterion in evaluation["criteria"]:
        if not criterion["name"]:
            continue
        name = (rubric.match_name(criterion["name"]) if rubric else None) or criterion["name"]
        key = CriterionKey(kind, criterion_text(rubric, name), model)
        confidence = criterion.get("confidence", 1.0)
        said = criterion.get("withheld_passed")
        withheld = Withheld(said, confidence) if said is not None else None
        found.setdefault(key, Graded(name, None if criterion.get("cannot_tell") else confidence, withheld))
    return list(found.items())


def criterion_text(rubric: Rubric | None, name: str) -> str:
    """What the criterion asks, normalized: a list criterion's text, a dimension's name with its
    description and anchors (what a 1, 3 and 5 look like is what the grader scores against)."""
    dimension = next((d for d in rubric.dimensions if d.name == name), None) if rubric else None
    if dimension is None:
        return normalize_name(name)
    return " | ".join(normalize_name(part) for part in _dimension_parts(dimension))


def _dimension_parts(dimension: Dimension) -> list[str]:
    return [dimension.name, dimension.description, *(f"{s}: {t}" for s, t in dimension.anchors.items())]


@lru_cache(maxsize=RUBRICS_CACHED)
def _parsed(text: str) -> Rubric | None:
    try:
        return parse_rubric(text)
    except RubricError:
        return None  # graded before a rule it breaks existed: its criteria pool by name


def _unknown_key(row: ReviewRow) -> CriterionKey:
    kind: Kind = "list" if isinstance(verdict_label(row.grader_verdict), bool) else "scored"
    return CriterionKey(kind, normalize_name(row.criterion), UNKNOWN)


def _mark_starts(
    pooled: dict[CriterionKey, PooledCriterion], versions: list[tuple[str, list[CriterionKey]]]
) -> None:
    """Set `since` and `change` on the criteria a later version of one grader model's window brought in
    (`versions`: each run of evaluations under one version, oldest first): "text changed" when the
    version before held a criterion of the same name, or one at the same place, that this version no
    longer has; else "added"."""
    seen = {versions[0][0]} if versions else set()
    for (_, before), (version, now) in itertools.pairwise(versions):
        if version in seen:
            continue  # back to a version graded earlier (threads with their own rubrics interleave)
        seen.add(version)
        gone = [key for key in before if key not in now]
        for place, key in enumerate(now):
            item = pooled[key]
            if key in before or item.versions[0] != version:
                continue
            replaced = any(_same_name(pooled[old], item) for old in gone) or (
                place < len(before) and before[place] in gone
            )
            item.since, item.change = version, "text changed" if replaced else "added"


def _same_name(old: PooledCriterion, new: PooledCriterion) -> bool:
    return normalize_name(old.name) == normalize_name(new.name)


def rows_by_criterion(reviews: Iterable[ReviewRow]) -> dict[str, list[ReviewRow]]:
    """The review rows of each criterion, named as first reviewed, in that order.

    A criterion is identified by its name (ignoring case and trailing punctuation) and the kind of
    its verdicts; a name used for both a pass/fail criterion and a scored dimension gets its kind
    added. Reviews of criteria the grader could not tell are left out: agreement is over judged ones.
    """
    rows: dict[tuple[str, str], list[ReviewRow]] = {}
    for row in reviews:
        if not is_judged(row.grader_verdict):
            continue  # the grader left it to the reviewer: their verdict, nothing to agree with
        judge = verdict_label(row.grader_verdict)
        key = (normalize_name(row.criterion), LIST_KIND if isinstance(judge, bool) else SCORED_KIND)
        rows.setdefault(key, []).append(row)
    kinds = Counter(name for name, _ in rows)
    return {
        found[0].criterion + (f" ({kind})" if kinds[name] > 1 else ""): found
        for (name, kind), found in rows.items()
    }
