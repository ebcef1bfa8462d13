"""What a proposed change would have done to the team's trusted reviews: the candidate built from a
reviewed case (the proposed rubric, or its calibration without the dropped example), the replay
(`bot.agreement.channel_replay.ChannelReplays.replay_candidate`: budget-checked, capped by
`RUBRIC_BOT_REPLAY_MAX_CASES`), and its one-line summary for the history.

Only trusted reviews count (trusted as calibration and the trust levels trust them: an editor's, or
agreeing people; cases an editor dropped from calibration left out), and the candidate is compared
with the verdicts those people reviewed, so "before" is what the team actually saw.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from bot.agreement.channel_replay import ChannelReplays
from bot.agreement.comparison import Comparison, CriterionComparison
from bot.agreement.replay import Case, Regrade, load_cases
from bot.agreement.trust_figures import trusted_reviews
from bot.db.proposals import Proposal
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.slack.blocks import plural
from bot.vocabulary.workspace import Workspace
from grading import RubricEvaluation

SKIPPED = "replay skipped (`/rubric set!`)"
"""The history's line for a rubric set without its replay."""


async def trusted_in(store: Store, workspace: Workspace, channel: str | None) -> list[ReviewRow]:
    """The trusted reviews of `channel` (None: of every channel of the workspace), in one query."""
    return trusted_reviews(await store.reviews_in_channel(workspace, channel, undropped_only=True))


def iterations_of(reviews: Sequence[ReviewRow]) -> int:
    """How many iterations `reviews` review."""
    return len({(row.grading_run_id, row.iteration) for row in reviews})


async def trusted_cases(
    store: Store, workspace: Workspace, channel: str | None, trusted: Sequence[ReviewRow]
) -> list[Case]:
    """The reviewed iterations of `channel` (None: every channel of the workspace), oldest first,
    each with only its `trusted` reviews; those with none left out."""
    kept_ids = {row.review_id for row in trusted}
    cases = await load_cases(store, workspace=workspace, channel=channel)
    kept = (Case(case.record, tuple(r for r in case.reviews if r.review_id in kept_ids)) for case in cases)
    return [case for case in kept if case.reviews]


def changed_by(proposal: Proposal, case: Case) -> bool:
    """Whether the proposal changes how `case` would be graded today: a new channel rubric does not
    reach a thread graded with its own rubric (numbered ``#…``, see
    `bot.vocabulary.provenance.rubric_version`), which keeps it; anything else reaches every case."""
    provenance = case.record.provenance
    return proposal.kind != "rubric" or provenance is None or not provenance["rubric_version"].startswith("#")


def candidate_of(proposal: Proposal) -> Callable[[Case], Case]:
    """How the proposal's candidate grades a case: with the proposed rubric; with the examples the
    case was graded with but the dropped one; or (a grader model) as it was, on the other model."""
    if proposal.kind == "rubric" and proposal.candidate is not None:
        text = proposal.candidate
        return lambda case: Case(replace(case.record, rubric_text=text), case.reviews, case.messages)
    if proposal.kind == "calibration_drop":
        return lambda case: Case(
            replace(case.record, evaluation=_without_example(case.record.evaluation, proposal.candidate)),
            case.reviews,
            case.messages,
        )
    return lambda case: case


def _without_example(evaluation: RubricEvaluation, example_id: str | None) -> RubricEvaluation:
    kept = [example for example in evaluation["calibration"] if example.get("id") != example_id]
    return {**evaluation, "calibration": kept}


@dataclass(frozen=True)
class Replayed:
    """A proposal's replay: the comparison with the team, and the candidate's regrades."""

    comparison: Comparison
    regrades: list[Regrade]

    def gap(self, key: tuple[str, int], criterion: str) -> str:
        """What the candidate said of `criterion` on the case (its gap), '' when nothing."""
        for regrade in self.regrades:
            if regrade.case.key == key:
                for found in regrade.evaluation["criteria"]:
                    if found["name"] == criterion:
                        return found.get("gap") or ""
        return ""


async def replay_proposal(
    replays: ChannelReplays, proposal: Proposal, cases: list[Case], labels: tuple[str, str]
) -> Replayed | None:
    """Replay `cases` with the proposal's candidate, charged to its channel; None when no case's
    history is left."""
    model = proposal.candidate if proposal.kind == "grader_model" else None
    done = await replays.replay_candidate(
        proposal.workspace,
        proposal.channel,
        cases,
        candidate=candidate_of(proposal),
        labels=labels,
        model=model,
    )
    return None if done is None else Replayed(*done)


def headline_row(comparison: Comparison) -> CriterionComparison | None:
    """The row a one-line summary reads: all criteria pooled, or the only criterion."""
    rows = comparison.overall or comparison.criteria
    return rows[0] if rows else None


def summary_line(comparison: Comparison) -> str:
    """E.g. ``replayed on 40 reviewed iterations: agreement 0.78→0.85 (+0.07, 95 % −0.02…+0.15) on
    52 verdicts; 3 flips``; the figures only from the minimum count on."""
    cases = plural(comparison.compared, "reviewed iteration")
    flips = plural(len(comparison.flips), "flip")
    stopped = " (stopped at the budget)" if comparison.stopped_at_budget else ""
    row = headline_row(comparison)
    if row is None:
        return f"replayed on {cases}{stopped}: no verdict to compare; {flips}"
    return f"replayed on {cases}{stopped}: {agreement_change(row)}; {flips}"


def agreement_change(row: CriterionComparison) -> str:
    """Agreement before → after with the 95 % interval of the difference and its count; under the
    minimum count, only the count."""
    verdicts = plural(row.n, "verdict")
    was, now = row.before.percent_agreement, row.after.percent_agreement
    if not row.before.enough or was is None or now is None or row.agreement_interval is None:
        return f"{verdicts}, too few to read"
    low, high = row.agreement_interval
    interval = f"95 % {signed(low)}…{signed(high)}"
    return f"agreement {was:.2f}→{now:.2f} ({signed(now - was)}, {interval}) on {verdicts}"


def signed(value: float) -> str:
    """E.g. ``+0.07`` or ``−0.02`` (a true minus sign)."""
    return f"{value:+.2f}".replace("-", "−")
