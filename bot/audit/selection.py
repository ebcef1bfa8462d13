"""Which finished runs the audit grader grades again: a share of them, chosen by the run's id.

The choice is a hash of the run's id compared with the share, so it is random across runs but the
same every time for one run (a resumed or replayed run is audited or not as before), and the same
in every process. `in_share` is that choice for any key (the shadow grader's iterations use it too).
"""

from __future__ import annotations

import hashlib

SELECTION_SALT = "rubric-bot audit"
"""Hashed with the run's id, so the audited runs are not those some other hash-based choice picks."""

HASH_SPACE = 2**64
"""The hash's range: its first 8 bytes read as an unsigned integer."""


def in_share(salt: str, key: str, share: float) -> bool:
    """Whether `key` is among the `share` (0 to 1) of keys chosen under `salt`: reproducible, and
    independent of the choices other salts make."""
    digest = hashlib.sha256(f"{salt}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < share * HASH_SPACE


def is_audited(run_id: int, share: float) -> bool:
    """Whether run `run_id` is among the `share` (0 to 1) of runs audited."""
    return in_share(SELECTION_SALT, str(run_id), share)
