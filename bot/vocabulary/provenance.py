"""An evaluation's provenance as the bot stores it: the engine's (`grading.Provenance`) plus what only
the bot knows, the rubric's version in the channel's history and the bot's own version."""

from __future__ import annotations

import functools
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final, TypedDict

from grading import RubricEvaluation, text_hash

UNKNOWN: Final = "unknown"
"""What a provenance field reads where it was not recorded (evaluations stored before provenance was)."""

DISTRIBUTION = "rubric-bot"
"""The installed distribution whose version is the bot's."""


@functools.cache  # read from the package's metadata file: ~2 ms of parsing, once per process
def bot_version() -> str:
    """The installed rubric-bot's version; UNKNOWN when run from an uninstalled checkout."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return UNKNOWN


class EvaluationProvenance(TypedDict):
    """What produced a stored evaluation (see `grading.Provenance` for the engine's fields)."""

    rubric_version: str
    """``v3`` for version 3 of the channel's default rubric, ``#`` and its text hash for a thread's own."""
    rubric_hash: str
    grader_model: str
    grader_prompt_hash: str
    calibration_examples: list[str]
    worker_model: str
    bot_version: str
    samples: int
    """Times the grader was asked (each criterion's ``confidence`` is a share of them); 1 on
    evaluations stored before samples were counted, when the grader was always asked once."""
    escalation_model: str | None
    """The model asked again for criteria whose samples disagreed; None when there was none."""


def stored_provenance(evaluation: RubricEvaluation, version: str = UNKNOWN) -> EvaluationProvenance:
    """The provenance to store with `evaluation`, graded against rubric `version` (see
    `rubric_version`; the run knows it from its start); left UNKNOWN, the store reads it as it
    saves the evaluation."""
    engine = evaluation.get("provenance")
    return EvaluationProvenance(
        rubric_version=version,
        rubric_hash=engine["rubric_hash"] if engine else UNKNOWN,
        grader_model=engine["grader_model"] if engine else UNKNOWN,
        grader_prompt_hash=engine["grader_prompt_hash"] if engine else UNKNOWN,
        calibration_examples=list(engine["calibration_examples"]) if engine else [],
        worker_model=(engine["worker_model"] if engine else None) or UNKNOWN,
        bot_version=bot_version(),
        samples=engine.get("samples", 1) if engine else 1,
        escalation_model=engine.get("escalation_model") if engine else None,
    )


def rubric_version(channel_version: int | None, rubric_text: str) -> str:
    """``v3`` for version 3 of the channel's default rubric, else ``#`` and the text's hash: a
    thread's own rubric has no number."""
    return f"v{channel_version}" if channel_version is not None else f"#{text_hash(rubric_text)}"


def read_provenance(stored: dict[str, Any] | None) -> EvaluationProvenance:
    """A stored provenance, every field recorded before it was kept reading UNKNOWN."""
    found = stored or {}
    return EvaluationProvenance(
        rubric_version=str(found.get("rubric_version") or UNKNOWN),
        rubric_hash=str(found.get("rubric_hash") or UNKNOWN),
        grader_model=str(found.get("grader_model") or UNKNOWN),
        grader_prompt_hash=str(found.get("grader_prompt_hash") or UNKNOWN),
        calibration_examples=[str(i) for i in found.get("calibration_examples") or []],
        worker_model=str(found.get("worker_model") or UNKNOWN),
        bot_version=str(found.get("bot_version") or UNKNOWN),
        samples=int(found.get("samples") or 1),
        escalation_model=found.get("escalation_model") or None,
    )
