"""Where a verdict came from: the rubric, grader model, instructions and examples that produced it.

Every evaluation carries a `Provenance`, so agreement figures can be kept apart per rubric version and
grader model instead of mixing verdicts that different graders gave against different rubrics.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Sequence
from typing import Literal, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AnyMessage

from grading.grader import GRADE_SCHEMAS, CalibrationExample

HASH_CHARS = 16
"""Hex digits kept of a SHA-256: enough to tell versions apart, short enough to read in a report."""

MODEL_NAME_KEY = "model_name"
"""The `response_metadata` key under which langchain's chat models report the model that answered
(the provider's dated name, e.g. ``gpt-4o-mini-2024-07-18``, rather than the alias asked for)."""


class Provenance(TypedDict):
    """What produced one evaluation."""

    rubric_hash: str
    """Hash of the rubric text graded against."""
    grader_model: str
    """The grader model as the provider named it in its answer; the model asked for when it did not."""
    grader_prompt_hash: str
    """Hash of the grader instructions sent: system prompt and answer schema (no per-case parts)."""
    calibration_examples: list[str]
    """Ids of the calibration examples shown (see `CalibrationExample.id`), in the order shown."""
    worker_model: str | None
    """The model that wrote the graded answer, as its provider named it; None when it did not say."""
    samples: int
    """Times the grader was asked for this verdict (each criterion's `confidence` is a share of them)."""
    escalation_model: str | None
    """The model asked for criteria whose confidence was low (see `CriterionResult.escalated`); None
    when there is none."""


MAX_CACHED_INSTRUCTIONS = 64
"""Grader instructions whose hash is kept (`instructions_hash`): a process grades with a few prompts."""


def text_hash(text: str) -> str:
    """A short, stable hash of `text`."""
    return hashlib.sha256(text.encode()).hexdigest()[:HASH_CHARS]


@functools.lru_cache(maxsize=MAX_CACHED_INSTRUCTIONS)
def instructions_hash(system_prompt: str, kind: Literal["list", "scored"] | None) -> str:
    """Hash of the grader's instructions for a rubric kind: its system prompt and answer schema.

    The schema is the kind's generic one (not the per-rubric one listing its names), so the hash
    changes with the instructions only; the rubric has a hash of its own. Kept once computed: every
    grader call asks for it with the same prompt.
    """
    schema = GRADE_SCHEMAS[kind].model_json_schema() if kind else {}
    return text_hash(system_prompt + "\n" + json.dumps(schema, sort_keys=True))


def asked_model(model: str | BaseChatModel) -> str:
    """The model a grader or worker was asked to be: its string, or the chat model's model name."""
    if isinstance(model, str):
        return model
    for attribute in ("model_name", "model", "model_id"):
        name = getattr(model, attribute, None)
        if isinstance(name, str) and name:
            return name
    return type(model).__name__


def answered_model(message: AnyMessage | None) -> str | None:
    """The model a chat model's answer says produced it, if it says."""
    if message is None:
        return None
    name = message.response_metadata.get(MODEL_NAME_KEY)
    return name if isinstance(name, str) and name else None


def example_ids(examples: Sequence[CalibrationExample]) -> list[str]:
    """The ids of the examples that have one, in order."""
    return [example["id"] for example in examples if example.get("id")]
