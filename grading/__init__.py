"""grading — make a langchain agent grade its own work against a rubric and revise until done.

No Slack here: put `RubricMiddleware` in any `create_agent(...)` (or deepagents'
`create_deep_agent`) and pass a `rubric` string on the invocation state.

Public API:

- `RubricMiddleware`, `RubricEvaluation`, `CriterionResult`, `RubricState`, `Status`,
  `DEFAULT_MAX_GRADER_CALLS` — the revise-and-grade loop.
- `abstained` — the criteria an evaluation's grader could not tell (left to a person).
- `Provenance`, `text_hash` — what produced a verdict (rubric hash, grader model as answered,
  instructions hash, calibration example ids, worker model), as each evaluation records it.
- `EVALUATION_START_EVENT`, `EVALUATION_END_EVENT` — the `type` of its custom stream events.
- `parse_rubric`, `Rubric`, `Criterion`, `Dimension`, `RubricError` — list and scored rubrics.
- `aggregate`, `Aggregate` — verdicts from 1–5 scores that one strong dimension cannot mask.
- `kappa`, `percent_agreement`, `majority_baseline`, `agreement_report`, `CriterionAgreement`,
  `correlated_dimensions` — human–grader agreement and dimension independence.
- `EVIDENCE_TOOLS` and each tool — safe counting and matching tools for the grader.
- `CalibrationExample`, `CalibrationSource` — team verdicts shown to the grader as worked examples,
  and the (plain or async) function that supplies them.
- `TrustSource` — the (plain or async) function that supplies, per criterion, the confidence under
  which a verdict is withheld and left to a person (thresholds from `calibrate`, say).
- `TranscriptGrader` — grade a transcript you already have once, as the middleware would.
- `answer_only`, `agrade_answer`, `grade_answer` — grade a final answer on its own, once: the
  request and the answer, none of the loop's drafts, feedback or calibration (an audit grader).
- `MATERIAL_SOURCE` — marks a user message as material shared for the work (kept in the grader's
  transcript with the request) rather than a request.
- `ANTHROPIC_LLM_TYPE` — the `_llm_type` of Anthropic chat models, whose prompts need cache
  breakpoints (the grader sets its own; see `grading.caching`).
- `difference_intervals`, `DifferenceIntervals` — bootstrap intervals on how much one grader's
  agreement with the humans beats another's.
- `calibrate`, `agreement_lower_bound`, `min_kept`, `DEFAULT_RISK` — selective evaluation: the
  confidence threshold above which the grader's verdicts agree with people at a chosen rate with a
  chosen risk (fixed-sequence testing with an exact binomial bound), the bound itself, the fewest
  reviews it needs, and a usual risk (0.05).
- `agreement_intervals`, `share_interval`, `Intervals` — cluster-bootstrap intervals on one grader's
  agreement and κ with the humans, and on a share (coverage, say).
"""

from grading.aggregation import Aggregate, aggregate
from grading.agreement import (
    KAPPA_TARGET,
    MIN_REVIEWS_FOR_KAPPA,
    CriterionAgreement,
    DifferenceIntervals,
    Intervals,
    agreement_intervals,
    agreement_report,
    correlated_dimensions,
    difference_intervals,
    kappa,
    majority_baseline,
    percent_agreement,
    share_interval,
)
from grading.answer import agrade_answer, answer_only, grade_answer
from grading.caching import ANTHROPIC_LLM_TYPE
from grading.grader import MATERIAL_SOURCE, CalibrationExample
from grading.middleware import (
    DEFAULT_MAX_GRADER_CALLS,
    EVALUATION_END_EVENT,
    EVALUATION_START_EVENT,
    CalibrationSource,
    CriterionResult,
    RubricEvaluation,
    RubricMiddleware,
    RubricState,
    Status,
    TrustSource,
    abstained,
)
from grading.once import TranscriptGrader
from grading.provenance import Provenance, text_hash
from grading.rubric import Criterion, Dimension, Rubric, RubricError, parse_rubric
from grading.selective import DEFAULT_RISK, agreement_lower_bound, calibrate, min_kept
from grading.tools import (
    EVIDENCE_TOOLS,
    count_characters,
    count_lines,
    count_sentences,
    count_syllables,
    count_words,
    regex_match,
)

__all__ = [
    "ANTHROPIC_LLM_TYPE",
    "DEFAULT_MAX_GRADER_CALLS",
    "DEFAULT_RISK",
    "EVALUATION_END_EVENT",
    "EVALUATION_START_EVENT",
    "EVIDENCE_TOOLS",
    "KAPPA_TARGET",
    "MATERIAL_SOURCE",
    "MIN_REVIEWS_FOR_KAPPA",
    "Aggregate",
    "CalibrationExample",
    "CalibrationSource",
    "Criterion",
    "CriterionAgreement",
    "CriterionResult",
    "DifferenceIntervals",
    "Dimension",
    "Intervals",
    "Provenance",
    "Rubric",
    "RubricError",
    "RubricEvaluation",
    "RubricMiddleware",
    "RubricState",
    "Status",
    "TranscriptGrader",
    "TrustSource",
    "abstained",
    "aggregate",
    "agrade_answer",
    "agreement_intervals",
    "agreement_lower_bound",
    "agreement_report",
    "answer_only",
    "calibrate",
    "correlated_dimensions",
    "count_characters",
    "count_lines",
    "count_sentences",
    "count_syllables",
    "count_words",
    "difference_intervals",
    "grade_answer",
    "kappa",
    "majority_baseline",
    "min_kept",
    "parse_rubric",
    "percent_agreement",
    "regex_match",
    "share_interval",
    "text_hash",
]
