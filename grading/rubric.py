"""The rubric model: a plain list of pass/fail criteria or YAML-scored dimensions.

A rubric string is one of two things:

* **A list rubric** — one criterion per non-blank line. Leading bullets (``-``, ``*``, ``+``,
  ``•``, ``1.``, ``1)``) are stripped; plain lines are criteria too. Markdown headings (``#``
  followed by a space, up to six ``#``) are skipped as titles; any other line starting with
  ``#`` (``#hashtags``, ``#2 priority``) is kept as a criterion, because a rubric line is far
  more likely to be content than a comment.
* **A scored rubric** — YAML with a ``dimensions`` list (and optionally ``aggregation`` and
  ``pass_score``); each dimension has a ``name`` and optionally ``weight``, ``fail_below``,
  ``description`` and ``anchors`` (what a 1, 3 and 5 look like)::

      dimensions:
        - name: Correctness
          weight: 0.5
          fail_below: 3
          anchors:
            5: All facts right.
            3: Minor slips that do not mislead.
            1: Contains false information.
      aggregation: weighted
      pass_score: 4

Line numbers in error messages count from 1 in the text exactly as given to
:func:`parse_rubric`. Both kinds parse into the same frozen, JSON-serialisable :class:`Rubric`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)

MAX_RUBRIC_CHARS = 8_000
"""Longest rubric text accepted (after stripping). The whole rubric goes into every grader
prompt, so a bound keeps the grader's input, cost and attention in check."""

MAX_CRITERIA = 30
"""Most criteria (list rubric) or dimensions (scored rubric) accepted. Beyond this a grader
cannot judge each one with care; 3–5 scored dimensions are the recommended size."""

RECOMMENDED_MAX_DIMENSIONS = 5
"""More scored dimensions than this earns a lint warning: graders stop scoring consistently."""

ANCHOR_SCORES = (1, 3, 5)
"""The scores that may carry an anchor; 2 and 4 are read as lying between them."""

TOP_LEVEL_KEYS = ("dimensions", "aggregation", "pass_score")
"""The keys a YAML rubric may have at its top level."""

_BULLET = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)])(?:\s+|$)")
_HEADING = re.compile(r"^\s*#{1,6}(?:\s|$)")
_TRAILING_PUNCTUATION = ".,;:!?"
_INVISIBLE = frozenset({"Cc", "Cf"})
"""Unicode categories ignored in names: control and format characters (zero-width spaces and
joiners, soft hyphens, byte-order marks) are invisible in a rubric yet make two names differ."""
MAX_NORMALIZED_NAMES = 1024
"""Names whose matching key is kept (`normalize_name`): the criteria of the rubrics a process grades."""
_YAML_START = re.compile(rf"^(?:{'|'.join(TOP_LEVEL_KEYS)})\s*:")

MAX_YAML_DEPTH = 20
"""Deepest nesting of YAML collections read in a rubric (a scored rubric needs four levels).
PyYAML builds nested collections by recursion, so a short text of brackets (``[[[[…]]]]``) would
otherwise exhaust Python's stack; deeper text is refused as a bad rubric instead."""


class _TooDeep(yaml.composer.ComposerError):
    """The YAML nests deeper than MAX_YAML_DEPTH."""


class _DepthBoundLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing collections nested deeper than MAX_YAML_DEPTH."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node | None:
        if self._depth >= MAX_YAML_DEPTH:
            mark = self.peek_event().start_mark
            raise _TooDeep(problem=f"it nests more than {MAX_YAML_DEPTH} levels deep", problem_mark=mark)
        self._depth += 1
        try:
            return super().compose_node(parent, index)  # type: ignore[arg-type]
        finally:
            self._depth -= 1


Score = Annotated[int, Field(ge=1, le=5)]
Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class RubricError(ValueError):
    """A rubric that cannot be used; the message names the line or field at fault."""


@functools.lru_cache(maxsize=MAX_NORMALIZED_NAMES)
def normalize_name(name: str) -> str:
    """The key under which grader-returned names are matched to rubric names (kept once computed:
    every grader answer matches the same rubric's names).

    Unicode compatibility forms are unified (NFKC: a decomposed accent equals the composed one),
    invisible characters are dropped (see ``_INVISIBLE``), and case, surrounding whitespace, runs
    of inner whitespace and trailing punctuation (``.,;:!?``) are ignored: graders often echo a
    criterion with a full stop added or dropped.
    """
    composed = unicodedata.normalize("NFKC", name)
    visible = "".join(ch for ch in composed if ch.isspace() or unicodedata.category(ch) not in _INVISIBLE)
    collapsed = " ".join(visible.split()).rstrip(_TRAILING_PUNCTUATION).rstrip()
    return collapsed.casefold()


def quoted(name: str) -> str:
    """A name for a message to people: as written, in typographic quotes (never Python's escapes)."""
    return f"“{name}”"


class Criterion(BaseModel):
    """One pass/fail line of a list rubric, its text as written (bullet stripped)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name


class Dimension(BaseModel):
    """One scored dimension of a YAML rubric."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Name
    weight: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    fail_below: Score | None = None
    anchors: dict[int, str] = Field(default_factory=dict)
    description: str = ""

    @field_validator("anchors")
    @classmethod
    def _anchors_at_1_3_5(cls, anchors: dict[int, str]) -> dict[int, str]:
        for score, text in anchors.items():
            if score not in ANCHOR_SCORES:
                raise ValueError(f"anchor {score} is not allowed; use 1, 3 and 5")
            if not text.strip():
                raise ValueError(f"anchor {score} is empty; say what a {score} looks like")
        return {score: anchors[score].strip() for score in sorted(anchors)}

    @field_validator("description")
    @classmethod
    def _strip_description(cls, description: str) -> str:
        return description.strip()


class Rubric(BaseModel):
    """A parsed rubric; build it with :func:`parse_rubric`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    kind: Literal["list", "scored"]
    criteria: tuple[Criterion, ...] = ()
    dimensions: tuple[Dimension, ...] = ()
    aggregation: Literal["weighted", "min", "per_dimension"] = "weighted"
    pass_score: float = Field(default=4.0, ge=1, le=5)
    warnings: tuple[str, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Rubric:
        field, other = ("dimensions", "criteria") if self.is_scored else ("criteria", "dimensions")
        items = getattr(self, field)
        if getattr(self, other):
            raise ValueError(f"{other}: a {self.kind} rubric cannot have {other}")
        if not items:
            raise ValueError(f"{field}: give at least one {_unit(self.is_scored)}")
        if len(items) > MAX_CRITERIA:
            raise ValueError(f"{field}: {len(items)} is too many; the limit is {MAX_CRITERIA}")
        if self.is_scored:
            duplicates = _duplicates(self.names)
            if duplicates:
                raise ValueError(
                    f"dimensions: names must differ (ignoring case and trailing punctuation) "
                    f"because scores are reported by name; repeated: {', '.join(duplicates)}"
                )
            try:
                _normalised_weights(self.dimensions)
            except ValueError as exc:
                raise ValueError(f"dimensions: {exc}") from None
        return self

    @property
    def is_scored(self) -> bool:
        """True for YAML rubrics with scored dimensions, False for pass/fail lists."""
        return self.kind == "scored"

    @property
    def names(self) -> list[str]:
        """Criterion texts or dimension names, in rubric order."""
        items = self.dimensions if self.is_scored else self.criteria
        return [item.name for item in items]

    def weights(self) -> dict[str, float]:
        """Dimension name -> weight, normalised to sum to 1 (empty for list rubrics).

        With no weights given every dimension weighs the same. When all are given they are
        relative (``2, 1, 1`` means ``.5, .25, .25``). When only some are given, they are read
        as shares of 1 and the dimensions without one split the remainder equally.
        """
        if not self.dimensions:
            return {}
        return dict(zip(self.names, _normalised_weights(self.dimensions), strict=True))

    def match_name(self, name: str) -> str | None:
        """The rubric's own spelling of a grader-returned name, or None when nothing matches.

        See :func:`normalize_name` for what is ignored; with duplicates the first one wins.
        """
        key = normalize_name(name)
        return next((n for n in self.names if normalize_name(n) == key), None)


def parse_rubric(text: str) -> Rubric:
    """Parse a rubric string (see the module docstring) or raise :class:`RubricError`."""
    stripped = text.strip()
    if len(stripped) > MAX_RUBRIC_CHARS:
        raise RubricError(f"rubric is {len(stripped):,} characters; the limit is {MAX_RUBRIC_CHARS:,}")
    data = _yaml_mapping(text)
    rubric = _parse_scored(stripped, data) if data is not None else _parse_list(text, stripped)
    return rubric.model_copy(update={"warnings": tuple(_lint(rubric))})


def _unit(scored: bool) -> str:
    return "dimension" if scored else "criterion"


def _duplicates(names: Sequence[str]) -> list[str]:
    """The first spelling of each name that occurs more than once after normalising."""
    counts = Counter(normalize_name(n) for n in names)
    first = {normalize_name(n): n for n in reversed(names)}
    return [first[key] for key, count in counts.items() if count > 1]


def _normalised_weights(dimensions: Sequence[Dimension]) -> list[float]:
    given = [d.weight for d in dimensions if d.weight is not None]
    missing = [d.name for d in dimensions if d.weight is None]
    if not given:
        return [1 / len(dimensions)] * len(dimensions)
    total = sum(given)
    if not missing:
        if total == 0:
            raise ValueError("weights are all zero; give at least one dimension a positive weight")
        return [d.weight / total for d in dimensions if d.weight is not None]
    if total >= 1:
        raise ValueError(
            f"the given weights already sum to {total:g}, leaving nothing for "
            f"{', '.join(missing)}; give every dimension a weight or keep the total under 1"
        )
    share = (1 - total) / len(missing)
    return [share if d.weight is None else d.weight for d in dimensions]


def _yaml_mapping(text: str) -> dict[Any, Any] | None:
    """The YAML mapping of a scored rubric, or None when the text is a list rubric."""
    looks_like_yaml = _starts_like_yaml(text)
    try:
        data = yaml.load(text, Loader=_DepthBoundLoader)
    except _TooDeep as exc:  # not a list rubric either: no one writes criteria this nested
        raise RubricError(_yaml_error_message(exc)) from None
    except yaml.YAMLError as exc:
        if not looks_like_yaml:
            return None
        raise RubricError(_yaml_error_message(exc)) from None
    if isinstance(data, dict) and "dimensions" in data:
        return data
    if looks_like_yaml:
        if not isinstance(data, dict):
            raise RubricError("a YAML rubric must be a mapping with a 'dimensions' list")
        raise RubricError("a YAML rubric needs a 'dimensions' list")
    return None


def _starts_like_yaml(text: str) -> bool:
    """Whether the first meaningful line opens a YAML rubric, so YAML errors get reported.

    Comment lines and a ``---`` document marker before it are passed over.
    """
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#") and line.strip() != "---":
            return bool(_YAML_START.match(line))
    return False


def _yaml_error_message(exc: yaml.YAMLError) -> str:
    problem = getattr(exc, "problem", None) or str(exc)
    mark = getattr(exc, "problem_mark", None)
    where = f"line {mark.line + 1}: " if mark is not None else ""
    return f"{where}the YAML rubric could not be read: {problem}"


def _parse_scored(stripped: str, data: Mapping[Any, Any]) -> Rubric:
    unknown = [str(k) for k in data if k not in TOP_LEVEL_KEYS]
    if unknown:
        raise RubricError(
            f"unknown key {', '.join(map(repr, unknown))}; a YAML rubric may have {', '.join(TOP_LEVEL_KEYS)}"
        )
    dimensions = data["dimensions"]
    if not isinstance(dimensions, list):
        raise RubricError("dimensions: expected a list, one '- name: ...' entry per dimension")
    fields = {k: v for k, v in data.items() if k != "dimensions"}
    try:
        return Rubric.model_validate({**fields, "text": stripped, "kind": "scored", "dimensions": dimensions})
    except ValidationError as exc:
        raise RubricError(_validation_message(exc, dimensions)) from None


def _parse_list(text: str, stripped: str) -> Rubric:
    criteria: list[Criterion] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if _HEADING.match(line):
            continue
        name = _BULLET.sub("", line, count=1).strip()
        if not normalize_name(name):
            continue  # blank, or nothing but invisible characters
        if len(criteria) == MAX_CRITERIA:
            raise RubricError(
                f"line {number}: too many criteria; the limit is {MAX_CRITERIA} — "
                f"split the rubric or merge criteria"
            )
        criteria.append(Criterion(name=name))
    if not criteria:
        raise RubricError("rubric is empty: write one criterion per line")
    return Rubric(text=stripped, kind="list", criteria=tuple(criteria))


def _validation_message(exc: ValidationError, dimensions: Sequence[Any]) -> str:
    """Turn pydantic's errors into one line per problem, each naming its field path."""
    lines = []
    for error in exc.errors(include_url=False, include_input=False):
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = "unknown key; allowed: name, weight, fail_below, anchors, description"
        path = _field_path(error["loc"], dimensions)
        lines.append(f"{path}: {message}" if path else message)
    return "; ".join(lines)


def _field_path(loc: tuple[int | str, ...], dimensions: Sequence[Any]) -> str:
    """``('dimensions', 0, 'anchors', 4)`` -> ``dimensions[0] (Correctness).anchors.4``."""
    path = ""
    for i, part in enumerate(loc):
        if part == "[key]":
            continue
        if isinstance(part, int):
            path += f"[{part}]"
            if loc[:i] == ("dimensions",):
                path += _dimension_label(dimensions, part)
        else:
            path += f".{part}" if path else str(part)
    return path


def _dimension_label(dimensions: Sequence[Any], index: int) -> str:
    entry = dimensions[index] if index < len(dimensions) else None
    name = entry.get("name") if isinstance(entry, dict) else None
    return f" ({name.strip()})" if isinstance(name, str) and name.strip() else ""


def _lint(rubric: Rubric) -> list[str]:
    """Plain-English advice about a rubric that parses but may grade poorly."""
    warnings: list[str] = []
    if len(rubric.dimensions) > RECOMMENDED_MAX_DIMENSIONS:
        warnings.append(
            f"The rubric has {len(rubric.dimensions)} dimensions; keep it to 3–5 so the grader "
            f"scores each one consistently."
        )
    for dim in rubric.dimensions:
        missing = [s for s in ANCHOR_SCORES if s not in dim.anchors]
        if missing:
            lacks = "anchors" if not dim.anchors else f"anchor for {_and(missing)}"
            warnings.append(
                f"Dimension {quoted(dim.name)} has no {lacks}; describe what a 1, 3 and 5 look like "
                f"so graders and people score it the same way."
            )
    for name in _duplicates(rubric.names):
        warnings.append(
            f"Criterion {quoted(name)} appears more than once (ignoring case and trailing "
            f"punctuation); the grader's verdicts for the copies cannot be told apart."
        )
    return warnings


def _and(items: Sequence[object]) -> str:
    """``[1, 3, 5]`` -> ``"1, 3 and 5"``."""
    words = [str(item) for item in items]
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"
