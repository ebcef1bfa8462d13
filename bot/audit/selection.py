"""Which finished runs the audit grader grades again: a share of them, chosen by the run's id.

The choice is a hash of the run's id compared with the share, so it is random across runs but the
same every time for one run (a resumed or replayed run is audited or not as before), and the same
in every process.
"""

from __future__ import annotations

import hashlib

SELECTION_SALT = "rubric-bot audit"
"""Hashed with the run's id, so the audited runs are not those some other hash-based choice picks."""

HASH_SPACE = 2**64
"""The hash's range: its first 8 bytes read as an unsigned integer."""


def is_audited(run_id: int, share: float) -> bool:
    """Whether run `run_id` is among the `share` (0 to 1) of runs audited."""
    digest = hashlib.sha256(f"{SELECTION_SALT}:{run_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * HASH_SPACE
