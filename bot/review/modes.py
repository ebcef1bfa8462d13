"""How a channel's iterations are reviewed (`/rubric review`), and who is asked for which form.

Two modes make reviews measure the grader rather than echo it. *Blind*: the form opens with nothing
pre-set and the grader's verdicts hidden until it is saved, and *Agree* (one click accepting every
verdict) becomes *Review…*. *Double review*: for a share of reviewed iterations, chosen by a hash of
the iteration's id (the same ones whenever asked), a second person is asked to review — the next one
who opens it, never its first reviewer — with the blind form, so that the two people's verdicts show
how far people agree with each other (`bot.agreement.people`). Changing the modes is
`bot.governance.review_modes`'s.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from bot.db.review_modes import ReviewModes
from bot.db.reviews import ReviewRow

HASH_SPACE = 2**64
"""The iteration hashes' range: a hash under ``share × HASH_SPACE`` picks an iteration for double review."""


@dataclass(frozen=True)
class ReviewAsk:
    """How one person is asked to review one iteration."""

    blind: bool
    """The form opens with nothing pre-set and the grader's verdicts hidden; no one-click Agree."""
    second: bool
    """They are asked as the iteration's second reviewer (double review)."""


def picked_for_double_review(grading_run_id: str, iteration: int, share: float) -> bool:
    """Whether the iteration is among the ``share`` asked for a second review: its id's hash decides,
    so the same iterations are picked every time (and by every process)."""
    digest = hashlib.sha256(f"{grading_run_id}:{iteration}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * HASH_SPACE


def awaiting_second(
    modes: ReviewModes, rows: Sequence[ReviewRow], grading_run_id: str, iteration: int
) -> str | None:
    """The iteration's only reviewer so far when it is picked for double review (a second review is
    wanted from anyone else); None otherwise."""
    reviewers = {row.reviewer for row in rows}
    if len(reviewers) != 1 or not picked_for_double_review(grading_run_id, iteration, modes.double_share):
        return None
    return next(iter(reviewers))


def review_ask(
    modes: ReviewModes, rows: Sequence[ReviewRow], grading_run_id: str, iteration: int, user: str
) -> ReviewAsk:
    """How ``user`` is asked to review the iteration, given its reviews so far (``rows``): as its
    second reviewer, blind, when a second review is wanted and they are not its first reviewer."""
    first = awaiting_second(modes, rows, grading_run_id, iteration)
    second = first is not None and first != user
    return ReviewAsk(blind=modes.blind or second, second=second)


def modes_words(modes: ReviewModes) -> str:
    """E.g. ``blind on · double review 20%``."""
    double = f"{modes.double_share:.0%}" if modes.double_share else "off"
    return f"blind {'on' if modes.blind else 'off'} · double review {double}"
