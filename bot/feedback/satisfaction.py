"""A channel's votes on its answers beside the grader's pass rate, each as a rate with its count and
95 % interval, said only from `MIN_COUNT_FOR_RATE` on (fewer show their counts alone)."""

from __future__ import annotations

from dataclasses import dataclass

from scipy.stats import binomtest
from slack_sdk.models.blocks import Block

from bot.db.feedback import FeedbackTally
from bot.slack.blocks import context_block, section_block

MIN_COUNT_FOR_RATE = 10
"""Fewest votes (or graded runs) a rate is shown over: under it, one vote swings it too far."""

CONFIDENCE = 0.95
"""Coverage of the interval shown with each rate (Wilson's score interval)."""


@dataclass(frozen=True)
class Rate:
    """`hits` out of `count`."""

    hits: int
    count: int

    def words(self, of: str) -> str:
        """E.g. ``2 of 3 votes`` or ``12 of 20 votes: 60 % (95 % CI 39–78 %)``."""
        counted = f"{self.hits} of {self.count} {of}"
        if self.count < MIN_COUNT_FOR_RATE:
            return counted
        low, high = binomtest(self.hits, self.count).proportion_ci(CONFIDENCE, method="wilson")
        share = self.hits / self.count
        return f"{counted}: {share:.0%} ({CONFIDENCE:.0%} CI {low:.0%}–{high:.0%})"


def satisfaction_lines(tally: FeedbackTally) -> list[str]:
    """The askers' 👍 share, the grader's pass rate, and 👎 on answers it passed, one line each."""
    return [
        f"Askers' 👍 on answers: {Rate(tally.thumbs_up, tally.votes).words('votes')}",
        f"Grader passed: {Rate(tally.satisfied_runs, tally.graded_runs).words('graded runs')}",
        f"👎 on answers the grader passed: "
        f"{Rate(tally.thumbs_down_on_satisfied, tally.votes_on_satisfied).words('votes on them')}",
    ]


def satisfaction_blocks(tally: FeedbackTally | None) -> list[Block]:
    """The lines in Slack, under a heading; none when nothing was graded or voted on."""
    if tally is None or not (tally.votes or tally.graded_runs):
        return []
    return [
        section_block("*Askers' verdicts on the answers*\n" + "\n".join(satisfaction_lines(tally))),
        context_block(
            f"👍/👎 under each final answer judge the answer, not the grader: they are not reviews. "
            f"Rates are shown from {MIN_COUNT_FOR_RATE} votes or runs, with their 95 % interval."
        ),
    ]


def satisfaction_table(tally: FeedbackTally | None) -> list[str]:
    """The lines for a terminal, under a heading; none when nothing was graded or voted on."""
    if tally is None or not (tally.votes or tally.graded_runs):
        return []
    return ["", "Askers' verdicts on the answers (👍/👎, not reviews of the grader):"] + [
        f"  {line}" for line in satisfaction_lines(tally)
    ]
