"""What a grader or a reviewer says of one criterion, as the store keeps it and the review form shows it."""

from __future__ import annotations

from typing import Literal

Verdict = Literal["pass", "fail", "cannot_tell", "1", "2", "3", "4", "5"]
"""A verdict on one criterion, the grader's or a reviewer's: pass/fail for a criterion of a list
rubric, the score (as text) for a dimension of a scored rubric; the grader's may be cannot_tell
(it abstained), a reviewer's never is."""
