"""Benchmark: does `grading.calibrate` keep its promise, how much does it leave to the grader, and
what do the samples behind a confidence cost?

Scripted graders of known accuracy and confidence quality grade pass/fail verdicts that simulated
reviewers (right 97 % of the time) review; a verdict "agrees" when grader and reviewer give the same
verdict. Each grader's pool of 20,000 reviewed verdicts is split at random 1,000 times into a
calibration set (100, 300 or 1,000 reviews) and a test set (the rest). `calibrate` picks a threshold
on the calibration set (target 0.9, risk 0.05); on the test set we count

- the **violation rate**: splits whose acted-on test verdicts agree under the target (the issue's
  measure; a split acting on nothing cannot violate), and the splits whose threshold's agreement in
  the whole population — known exactly for these graders — is under the target (the guarantee
  itself). Both should be ≤ risk;
- the **coverage**: the share of test verdicts acted on (0 for a split promising nothing), beside the
  **oracle** coverage, that of the lowest threshold whose population agreement reaches the target.

The graders:

- ``sampled x5`` / ``sampled x3``: 5 or 3 samples per verdict, each right with the verdict's own
  probability s ~ Beta(5, 1) (easy and hard cases; mean 0.83); verdict = the majority, confidence =
  its share of samples (what ``RUBRIC_BOT_GRADER_SAMPLES`` gives). Population agreement is exact
  (beta-binomial).
- ``verbal calibrated``: a confidence c ~ U(0.5, 1) with P(right) = c.
- ``verbal uninformative``: c ~ U(0.5, 1) unrelated to P(right) = 0.85: no threshold reaches 0.9,
  so a sound calibration should promise nothing.

Then the grader's cost with ``RUBRIC_BOT_GRADER_SAMPLES=3`` against 1, for benchmarks/cost.py's
channel (20 runs of 2-3 iterations, 12 criteria, 5 calibration examples): the grader's real prompt
(schema, instructions, payload) counted in words as the stand-in counts tokens, the cached fixed
part read by every sample once the channel's first iteration (whose samples go out together, so
none finds it cached) has written it, 40 output tokens per criterion (a verdict and its reason);
priced with the bot's cost module (bot.limits.prices, genai-prices' bundled table).

    python benchmarks/selective.py [--splits 1000] [--seed 0]

Writes a JSON summary to benchmarks/results/selective.json.

Results (seed 0, 1,000 splits, target 0.9, risk 0.05; violation = share of splits [95 % CI]; coverage
= mean share of test verdicts acted on, oracle = best threshold knowing the truth):

    grader               reviews promised  violations (test)     (population)          coverage oracle
    sampled x5               100      388  0.015 [0.008, 0.025]  0.015 [0.008, 0.025]     0.260  0.802
    sampled x5               300      899  0.006 [0.002, 0.013]  0.006 [0.002, 0.013]     0.650  0.802
    sampled x5              1000     1000  0.002 [0.000, 0.007]  0.002 [0.000, 0.007]     0.796  0.802
    sampled x3               100      256  0.003 [0.001, 0.009]  0.003 [0.001, 0.009]     0.165  0.643
    sampled x3               300      673  0.001 [0.000, 0.006]  0.001 [0.000, 0.006]     0.436  0.643
    sampled x3              1000      989  0.000 [0.000, 0.004]  0.000 [0.000, 0.004]     0.639  0.643
    verbal calibrated        100       33  0.016 [0.009, 0.026]  0.016 [0.009, 0.026]     0.010  0.297
    verbal calibrated        300      182  0.007 [0.003, 0.014]  0.005 [0.002, 0.012]     0.023  0.297
    verbal calibrated       1000      361  0.016 [0.009, 0.026]  0.008 [0.003, 0.016]     0.044  0.297
    verbal uninformative     100        5  0.005 [0.002, 0.012]  0.005 [0.002, 0.012]     0.001  0.000
    verbal uninformative     300        3  0.003 [0.001, 0.009]  0.003 [0.001, 0.009]     0.000  0.000
    verbal uninformative    1000        0  0.000 [0.000, 0.004]  0.000 [0.000, 0.004]     0.000  0.000

    grader cost of a channel's 20 runs of 2-3 iterations, per samples per iteration:
      x1: 80,070 input tokens (60,025 cached), 24,000 output;
          gpt-4o-mini $0.0219 (uncached $0.0264), claude-sonnet-4-5 $0.4391 (uncached $0.6002)
      x3: 240,210 input tokens (180,075 cached), 72,000 output;
          gpt-4o-mini $0.0657 (uncached $0.0792), claude-sonnet-4-5 $1.32 (uncached $1.80)
      extra for x3: 160,140 input tokens, $0.0438 (gpt-4o-mini), $0.8781 (claude-sonnet-4-5);
          $0.0022 / $0.0439 a run

Reading: no grader, calibration size or measure breaks the promise (every violation rate ≤ 0.016,
its 95 % interval under 0.05). With the confidences the bot's samples give (sampled x5 / x3),
300 reviews reach 81 % / 68 % of the oracle's coverage (0.650 of 0.802, 0.436 of 0.643) and 1,000
reviews nearly all of it; 100 reviews promise something in 39 % / 26 % of splits. A grader stating a
continuous confidence whose agreement falls steadily below the top gets little (0.023 of 0.297 at
300): fixed-sequence testing starts with the narrowest slices (5 %, 10 % of verdicts), whose few
verdicts rarely clear a bound of 0.9, and stops at the first that does not. A grader whose
confidence says nothing is, rightly, almost never trusted. Three samples cost 3.0 times one (the
cache saves the same share of each): $0.0022 more a run on gpt-4o-mini, $0.044 on Claude Sonnet 4.5.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from langchain_core.utils.function_calling import convert_to_openai_tool
from scipy.stats import betabinom, binomtest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.cost import ANTHROPIC_MODEL, EXAMPLES, OPENAI_MODEL, RUBRIC, fixed_tokens, transcript
from bot.limits.prices import RoleUsage, dollars, price
from grading import calibrate, parse_rubric
from grading.grader import GRADER_SYSTEM_PROMPT, build_payload, grade_schema

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.9
RISK = 0.05
REVIEWER_ACCURACY = 0.97
"""How often a simulated reviewer gives the right verdict: people err too, and agreement is measured
against them, not against the truth."""
POOL = 20_000
REVIEWS = (100, 300, 1000)
SAMPLE_SKILL = (5.0, 1.0)
"""Beta parameters of a verdict's per-sample accuracy for the sampled graders."""
OUTPUT_TOKENS_PER_CRITERION = 40
RUNS = 20

Floats = npt.NDArray[np.float64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Grader:
    """A scripted grader: draws verdicts (confidence, whether the grader is right) and knows, for
    any threshold, the population's agreement with reviewers and coverage above it."""

    name: str
    draw: Callable[[np.random.Generator, int], tuple[Floats, Bools]]
    agreement_above: Callable[[float], float]
    coverage_above: Callable[[float], float]
    thresholds: Floats
    """Every threshold worth trying when the truth is known (the confidences it can give)."""


def agreeing(right: Bools, rng: np.random.Generator) -> Bools:
    """Whether a reviewer agrees: both right, or both wrong on a pass/fail verdict."""
    reviewer_right = rng.random(right.size) < REVIEWER_ACCURACY
    return right == reviewer_right


def with_reviewers(p_right: float | Floats) -> float | Floats:
    """Agreement with a reviewer of a verdict right with probability `p_right`."""
    return p_right * REVIEWER_ACCURACY + (1 - p_right) * (1 - REVIEWER_ACCURACY)


def sampled(samples: int) -> Grader:
    """A grader asked `samples` (odd) times; right samples ~ BetaBinomial(samples, *SAMPLE_SKILL)."""
    counts = np.arange(samples + 1)
    pmf = betabinom.pmf(counts, samples, *SAMPLE_SKILL)
    confidence = np.maximum(counts, samples - counts) / samples
    majority_right = counts > samples / 2

    def draw(rng: np.random.Generator, n: int) -> tuple[Floats, Bools]:
        skill = rng.beta(*SAMPLE_SKILL, size=n)
        right_samples = rng.binomial(samples, skill)
        return np.maximum(right_samples, samples - right_samples) / samples, right_samples > samples / 2

    def above(threshold: float) -> Bools:
        return confidence >= threshold - 1e-12

    def agreement_above(threshold: float) -> float:
        kept = above(threshold)
        agree = with_reviewers(majority_right.astype(float))
        return float((pmf[kept] * agree[kept]).sum() / pmf[kept].sum())

    return Grader(
        f"sampled x{samples}",
        draw,
        agreement_above,
        lambda threshold: float(pmf[above(threshold)].sum()),
        np.unique(confidence),
    )


def verbal(p_right: Callable[[Floats], Floats], name: str) -> Grader:
    """A grader stating a confidence c ~ U(0.5, 1), right with probability `p_right(c)`."""
    grid = np.linspace(0.5, 1.0, 20_001)

    def draw(rng: np.random.Generator, n: int) -> tuple[Floats, Bools]:
        confidence = rng.uniform(0.5, 1.0, n)
        return confidence, rng.random(n) < p_right(confidence)

    def agreement_above(threshold: float) -> float:
        # c is uniform: the mean over a fine grid above the threshold is the integral's average
        return float(np.mean(with_reviewers(p_right(grid[grid >= threshold]))))

    return Grader(name, draw, agreement_above, lambda threshold: (1.0 - threshold) / 0.5, grid[::20])


GRADERS = (
    sampled(5),
    sampled(3),
    verbal(lambda c: c, "verbal calibrated"),
    verbal(lambda c: np.full_like(c, 0.85), "verbal uninformative"),
)


def oracle_coverage(grader: Grader) -> float:
    """Coverage of the lowest threshold whose population agreement reaches the target (0 if none)."""
    reaching = [t for t in grader.thresholds if grader.agreement_above(float(t)) >= TARGET]
    return grader.coverage_above(float(min(reaching))) if reaching else 0.0


@dataclass
class Outcome:
    """One grader at one calibration size, over every split."""

    grader: str
    reviews: int
    splits: int
    promised: int
    test_violations: int
    population_violations: int
    mean_coverage: float
    oracle_coverage: float

    def share_words(self, count: int) -> str:
        interval = binomtest(count, self.splits).proportion_ci(0.95, method="exact")
        return f"{count / self.splits:.3f} [{interval.low:.3f}, {interval.high:.3f}]"


def run(grader: Grader, reviews: int, splits: int, rng: np.random.Generator) -> Outcome:
    confidences, right = grader.draw(rng, POOL)
    agreed = agreeing(right, rng)
    outcome = Outcome(grader.name, reviews, splits, 0, 0, 0, 0.0, oracle_coverage(grader))
    coverages = []
    for _ in range(splits):
        order = rng.permutation(POOL)
        calibration, test = order[:reviews], order[reviews:]
        threshold = calibrate(confidences[calibration].tolist(), agreed[calibration].tolist(), TARGET, RISK)
        if threshold is None:
            coverages.append(0.0)
            continue
        outcome.promised += 1
        kept = test[confidences[test] >= threshold]
        coverages.append(kept.size / test.size)
        outcome.test_violations += bool(kept.size) and float(agreed[kept].mean()) < TARGET
        outcome.population_violations += grader.agreement_above(threshold) < TARGET
    outcome.mean_coverage = float(np.mean(coverages))
    return outcome


@dataclass
class SampleCost:
    """The grader's tokens and money for the channel at one number of samples."""

    samples: int
    input_tokens: int
    cached_tokens: int
    output_tokens: int
    openai_usd: float
    anthropic_usd: float
    uncached_openai_usd: float
    """The same calls had no prompt cache served any of them."""
    uncached_anthropic_usd: float


def grader_cost(samples: int) -> SampleCost:
    """The channel's grader calls at `samples` per iteration, each priced on its own (a provider's
    long-context rates apply per request, never to a sum of requests)."""
    rubric = parse_rubric(RUBRIC)
    schema = json.dumps([convert_to_openai_tool(grade_schema(rubric.kind, tuple(rubric.names)))])
    fixed = fixed_tokens(before=False)
    output = OUTPUT_TOKENS_PER_CRITERION * len(rubric.names)
    cost = SampleCost(samples, 0, 0, 0, 0.0, 0.0, 0.0, 0.0)
    for run_number in range(RUNS):
        for iteration in range(2 + run_number % 2):
            payload = build_payload(
                rubric, transcript(run_number, iteration), iteration=iteration, calibration=EXAMPLES
            )
            request = len(f"{schema}\n{GRADER_SYSTEM_PROMPT}\n{payload.text}".split())
            first_wave = cost.input_tokens == 0  # sent together: none finds the fixed part cached
            call = RoleUsage(
                model="",
                input_tokens=request,
                cached_input_tokens=0 if first_wave else fixed,
                output_tokens=output,
            )
            anthropic_call = call.model_copy(update={"cache_write_tokens": fixed if first_wave else 0})
            cost.input_tokens += samples * request
            cost.cached_tokens += samples * call.cached_input_tokens
            cost.output_tokens += samples * output
            cost.openai_usd += samples * _usd(call, OPENAI_MODEL)
            cost.anthropic_usd += samples * _usd(anthropic_call, ANTHROPIC_MODEL)
            uncached = call.model_copy(update={"cached_input_tokens": 0})
            cost.uncached_openai_usd += samples * _usd(uncached, OPENAI_MODEL)
            cost.uncached_anthropic_usd += samples * _usd(uncached, ANTHROPIC_MODEL)
    return cost


def _usd(call: RoleUsage, model: tuple[str, str]) -> float:
    priced = price(call.model_copy(update={"model": ":".join(model)}))
    if priced is None:
        raise SystemExit(f"genai-prices has no price for {model}")
    return priced


def report(outcomes: list[Outcome], costs: list[SampleCost]) -> str:
    lines = [
        f"{'grader':<21}{'reviews':>7}{'promised':>9}  {'violations (test)':<22}"
        f"{'(population)':<22}{'coverage':>8}{'oracle':>7}"
    ]
    for o in outcomes:
        lines.append(
            f"{o.grader:<21}{o.reviews:>7}{o.promised:>9}  {o.share_words(o.test_violations):<22}"
            f"{o.share_words(o.population_violations):<22}{o.mean_coverage:>8.3f}{o.oracle_coverage:>7.3f}"
        )
    lines.append("")
    lines.append(f"grader cost of a channel's {RUNS} runs of 2-3 iterations, per samples per iteration:")
    for cost in costs:
        lines.append(
            f"  x{cost.samples}: {cost.input_tokens:,} input tokens ({cost.cached_tokens:,} cached), "
            f"{cost.output_tokens:,} output;\n"
            f"      {OPENAI_MODEL[1]} {dollars(cost.openai_usd)} "
            f"(uncached {dollars(cost.uncached_openai_usd)}), "
            f"{ANTHROPIC_MODEL[1]} {dollars(cost.anthropic_usd)} "
            f"(uncached {dollars(cost.uncached_anthropic_usd)})"
        )
    one, more = costs
    lines.append(
        f"  extra for x{more.samples}: {more.input_tokens - one.input_tokens:,} input tokens, "
        f"{dollars(more.openai_usd - one.openai_usd)} ({OPENAI_MODEL[1]}), "
        f"{dollars(more.anthropic_usd - one.anthropic_usd)} ({ANTHROPIC_MODEL[1]});\n      "
        f"{dollars((more.openai_usd - one.openai_usd) / RUNS)} / "
        f"{dollars((more.anthropic_usd - one.anthropic_usd) / RUNS)} a run"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--splits", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    outcomes = [run(grader, reviews, args.splits, rng) for grader in GRADERS for reviews in REVIEWS]
    costs = [grader_cost(1), grader_cost(3)]
    print(f"target {TARGET}, risk {RISK}, {args.splits} splits of {POOL:,} reviewed verdicts per grader\n")
    print(report(outcomes, costs))
    out = ROOT / "benchmarks" / "results" / "selective.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"outcomes": [asdict(o) for o in outcomes], "costs": [asdict(c) for c in costs]}, indent=2)
    )


if __name__ == "__main__":
    main()
