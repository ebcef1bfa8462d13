"""Which of the grader's returned items grades which rubric criterion.

Graders echo criterion names imperfectly: a full stop dropped, a long criterion shortened, a
pasted name with a zero-width space. Re-asking costs a model call, so every match that is
unambiguous is taken first, in this order:

1. equal after :func:`grading.rubric.normalize_name`;
2. a returned name that identifies exactly one open criterion, by containment (one name inside
   the other) or else by a clear best similarity;
3. position, when the grader returned exactly as many items as there are open criteria.

What is left over is reported, never dropped: criteria nobody graded (to re-ask for) and
returned items that grade no criterion (to show).
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from grading.rubric import normalize_name

SIMILARITY_FLOOR = 0.8
"""Least `difflib` similarity ratio (0–1) at which a returned name may stand for a criterion: high
enough that a reworded name matches ("poem has 3 lines", 0.86) and an opposite one does not
("no rhyme" for "it rhymes", 0.71)."""

SIMILARITY_MARGIN = 0.15
"""How far the best similarity must lead the runner-up for the match to count as clear."""


@dataclass(frozen=True)
class NameMatch:
    """The outcome of matching: criterion index -> returned item index, plus what is left."""

    graded: dict[int, int]
    """Criterion (position in the rubric) -> the returned item that grades it."""
    missing: list[int]
    """Open criteria no returned item grades, in rubric order."""
    unmatched: list[int]
    """Returned items that grade no criterion, in the order returned."""


def match_names(
    names: Sequence[str], returned: Sequence[str], open_: Sequence[int] | None = None
) -> NameMatch:
    """Match the grader's `returned` names to the rubric's `names`.

    Only the criteria at the `open_` positions (all by default) are still to be graded; a
    returned item equal to an already graded criterion is neither used nor unmatched (the first
    answer stands).
    """
    keys = [normalize_name(name) for name in names]
    wanted = list(range(len(names)) if open_ is None else open_)
    graded: dict[int, int] = {}
    left: list[int] = []
    for item, name in enumerate(returned):
        key = normalize_name(name)
        same = [i for i in wanted if keys[i] == key and i not in graded]
        if same:
            graded[same[0]] = item
        elif key not in keys:
            left.append(item)
    _match_unambiguous(keys, [normalize_name(name) for name in returned], wanted, graded, left)
    if len(returned) == len(wanted):
        for item in list(left):
            if wanted[item] not in graded:
                graded[wanted[item]] = item
                left.remove(item)
    return NameMatch(graded=graded, missing=[i for i in wanted if i not in graded], unmatched=left)


def _match_unambiguous(
    keys: Sequence[str],
    returned: Sequence[str],
    wanted: Sequence[int],
    graded: dict[int, int],
    left: list[int],
) -> None:
    """Step 2: each left-over item that points at one open criterion, no other item pointing there."""
    open_keys = {i: keys[i] for i in wanted if i not in graded}
    proposals = {item: _identify(returned[item], open_keys) for item in left}
    claims = Counter(proposals.values())
    for item, criterion in proposals.items():
        if criterion is not None and claims[criterion] == 1:
            graded[criterion] = item
            left.remove(item)


def _identify(key: str, candidates: dict[int, str]) -> int | None:
    """The one candidate `key` stands for, by containment and then by clear similarity; else None."""
    if not key:
        return None
    containing = [i for i, name in candidates.items() if key in name or name in key]
    if len(containing) == 1:
        return containing[0]
    pool = {i: candidates[i] for i in containing} if containing else candidates
    ranked = sorted(
        ((difflib.SequenceMatcher(None, key, name).ratio(), i) for i, name in pool.items()), reverse=True
    )
    if not ranked or ranked[0][0] < SIMILARITY_FLOOR:
        return None
    runner_up = ranked[1][0] if len(ranked) > 1 else 0.0
    return ranked[0][1] if ranked[0][0] - runner_up >= SIMILARITY_MARGIN else None
