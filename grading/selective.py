"""Selective evaluation: the confidence above which the grader's verdicts can be acted on alone.

The grader keeps (acts on) a verdict only when its confidence clears a threshold λ, and leaves the
rest to people. :func:`calibrate` chooses λ from reviewed verdicts — each one's confidence and
whether a trusted person agreed with it — so that the kept verdicts agree with people at a rate of
at least ``target`` with probability at least ``1 - risk``. This is the fixed-sequence testing of
"Trust or Escalate" (Jung, Brahman and Choi, ICLR 2025), itself an instance of Learn then Test
(Angelopoulos et al., 2021), with an exact one-sided binomial (Clopper–Pearson) bound from scipy.

:func:`agreement_lower_bound` is that bound on its own (for showing the agreement observed on kept
verdicts with the interval behind it) and :func:`min_kept` the fewest kept verdicts for which any
threshold can be promised (for saying how many more reviews a criterion needs).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

DEFAULT_RISK = 0.05
"""A usual `risk`: with probability 95 % the kept verdicts agree with people at least at the target,
reached from a few dozen reviews at a 90 % target (:func:`min_kept` gives 29)."""

KEEP_STEP = 0.05
"""Candidate thresholds are the confidences that keep 5 %, 10 %, …, 100 % of the reviewed verdicts:
fine enough that coverage is lost in steps of at most 5 points, coarse enough that the sequence of
tests stays short and each added step brings in new verdicts."""


def agreement_lower_bound(agreed: int, kept: int, risk: float) -> float:
    """Exact one-sided (Clopper–Pearson) lower bound on an agreement rate, at level ``risk``.

    With ``agreed`` of ``kept`` verdicts agreeing, the true rate is at least the returned value
    with probability at least ``1 - risk`` (0 when nothing agreed). Raises ValueError unless
    ``0 <= agreed <= kept``, ``kept >= 1`` and ``0 < risk < 1``.
    """
    _check_risk(risk)
    if kept < 1 or not 0 <= agreed <= kept:
        raise ValueError(f"need 0 <= agreed <= kept and kept >= 1, got agreed={agreed}, kept={kept}")
    if agreed == 0:
        return 0.0
    # Imported here: scipy takes a while to import, and `grading` is imported at the bot's start-up.
    from scipy.stats import beta

    # Clopper–Pearson's bound in closed form: the `risk` quantile of Beta(agreed, kept - agreed + 1),
    # the same number as scipy's binomtest(...).proportion_ci(method="exact") without its root search.
    return float(beta.ppf(risk, agreed, kept - agreed + 1))


def min_kept(target: float, risk: float) -> int:
    """Fewest kept verdicts for which a threshold can be promised at all: even if every one of them
    agreed, fewer leave the Clopper–Pearson bound under ``target``.

    All ``m`` agreeing bound the rate by ``risk ** (1 / m)``, which reaches ``target`` from
    ``m = log(risk) / log(target)`` on; the exact bound settles the rounding.
    """
    _check_target(target)
    _check_risk(risk)
    kept = max(1, math.ceil(math.log(risk) / math.log(target)) - 1)
    while agreement_lower_bound(kept, kept, risk) < target:
        kept += 1
    return kept


def calibrate(
    confidences: Sequence[float], agreed: Sequence[bool], target: float, risk: float
) -> float | None:
    """The lowest confidence threshold λ whose kept verdicts agree with people at a rate of at least
    ``target`` with probability at least ``1 - risk``; None when no threshold can promise it.

    ``confidences[i]`` is the grader's confidence in reviewed verdict ``i`` and ``agreed[i]``
    whether a trusted person agreed with it. A verdict is kept when its confidence is ≥ λ.

    How λ is found (fixed-sequence testing):

    1. Candidate thresholds come from the confidences alone: the confidences that keep 5 %, 10 %,
       …, 100 % of the verdicts (ties keep every verdict at the threshold, so equal candidates
       merge), skipping those that keep fewer than :func:`min_kept` — there the bound could not
       reach ``target`` even if all agreed.
    2. From the highest candidate (fewest kept) down, each is tested: the null hypothesis "kept
       verdicts agree at a rate under ``target``" is rejected when the Clopper–Pearson lower bound
       at level ``risk`` on the kept verdicts' agreement is ≥ ``target``.
    3. Testing stops at the first candidate not rejected; λ is the last one rejected (None if the
       first fails).

    Why the guarantee holds. Assume the reviewed verdicts and the ones to come are independent
    draws from one population (the same grader, prompt and kind of request) and people's
    agreement is what is measured. For a fixed threshold, the kept verdicts are independent draws
    from the verdicts at or above it, so their agreements are binomial with the population's rate
    at that threshold, and the exact bound wrongly clears a rate under ``target`` with probability
    at most ``risk``. The candidates depend on the confidences only, never on who agreed, so this
    holds for each of them as if it had been fixed in advance. Fixed-sequence testing then needs
    no correction for testing many: a wrong λ is returned only if the first candidate in the order
    whose rate is truly under ``target`` is wrongly rejected (every later one is reached only
    through it), and that single event has probability at most ``risk``. So with probability at
    least ``1 - risk``, every threshold down to λ — λ included — keeps verdicts agreeing at a rate
    ≥ ``target``. No monotonicity of agreement in confidence is assumed; it only decides how much
    coverage the sequence reaches before it stops.

    Deterministic, no I/O. Raises ValueError when the sequences differ in length, a confidence is
    not a finite number, or ``target`` or ``risk`` is not strictly between 0 and 1.
    """
    _check_target(target)
    _check_risk(risk)
    if len(confidences) != len(agreed):
        raise ValueError(f"{len(confidences)} confidences but {len(agreed)} agreements")
    ranked_confidences, ranked_agreed = _ranked(confidences, agreed)
    if not np.isfinite(ranked_confidences).all():
        raise ValueError("every confidence must be a finite number")
    agreed_within = np.cumsum(ranked_agreed)  # agreed_within[m - 1]: agreements among the m most confident
    fewest = min_kept(target, risk)
    threshold = None
    for candidate in _candidates(ranked_confidences):
        kept = int(np.count_nonzero(ranked_confidences >= candidate))
        if kept < fewest:
            continue
        if agreement_lower_bound(int(agreed_within[kept - 1]), kept, risk) < target:
            break
        threshold = float(candidate)
    return threshold


def _ranked(
    confidences: Sequence[float], agreed: Sequence[bool]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
    """Confidences from the highest down, and whether each of those verdicts was agreed with."""
    values = np.asarray(confidences, dtype=np.float64)
    order = np.argsort(-values, kind="stable")
    return values[order], np.asarray(agreed, dtype=np.bool_)[order]


def _candidates(ranked: npt.NDArray[np.float64]) -> list[float]:
    """The confidences keeping 5 %, 10 %, … of the verdicts (`ranked` from the highest down),
    highest first, without repeats."""
    steps = round(1 / KEEP_STEP)
    kept_counts = {math.ceil(len(ranked) * step / steps) for step in range(1, steps + 1)}
    return sorted({float(ranked[count - 1]) for count in kept_counts if count}, reverse=True)


def _check_target(target: float) -> None:
    if not 0 < target < 1:
        raise ValueError(f"target must be strictly between 0 and 1, got {target}")


def _check_risk(risk: float) -> None:
    if not 0 < risk < 1:
        raise ValueError(f"risk must be strictly between 0 and 1, got {risk}")
