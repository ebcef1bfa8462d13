"""How a run ended, as the store records it and the threads, the report and the terminal say it.

A grading's own final statuses come from `grading`; the bot adds the endings it alone knows of.
"""

from __future__ import annotations

from typing import Final, Literal

from grading import Status

RunStatus = Status | Literal["interrupted", "answered", "timed_out", "error", "stopped"]
"""How a run ended (`runs.status`): its grading's final status, or one of the bot's own below."""

INTERRUPTED: Final = "interrupted"
"""Run status of a run stopped before it finished (shutdown, or found after a crash)."""

ANSWERED: Final = "answered"
"""Run status of a run answered without a rubric (nothing was graded)."""

TIMED_OUT: Final = "timed_out"
"""Run status of a run ended because a model call or the whole run took longer than allowed."""

FAILED: Final = "error"
"""Run status of a run ended by any other failure of the models or the agent."""

STOPPED: Final = "stopped"
"""Run status of a run a person stopped (Slack's Stop button, or `/rubric stop`) before it ended."""
