"""Evaluation provenances for the agreement tests: made by a rubric version and a grader model."""

from __future__ import annotations

from bot.vocabulary.provenance import EvaluationProvenance


def provenance(version: str, model: str = "grader-1") -> EvaluationProvenance:
    """What an evaluation graded under rubric `version` by grader `model` records."""
    return EvaluationProvenance(
        rubric_version=version,
        rubric_hash="h",
        grader_model=model,
        grader_prompt_hash="p",
        calibration_examples=[],
        worker_model="w",
        bot_version="0.1.0",
    )
