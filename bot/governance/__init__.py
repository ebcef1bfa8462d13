"""Who may change how a channel is graded, and keeping every change visible and reversible.

- ``editors``: `RUBRIC_BOT_RUBRIC_EDITORS` or a workspace's own (people and user groups), the admin check
  (`is_workspace_admin`), cached briefly, failing closed when Slack cannot answer.
- ``changes``: a change of a channel's default rubric (set, clear, revert): stored as a new
  version and announced in the channel; the history listing and its rendering.
- ``calibration_drops``: `/rubric calibration` (the examples in force) and an editor's
  `/rubric calibration drop N`, announced in the channel and kept in the history.
- ``review_modes``: `/rubric review` (blind, double review): shown, an editor's change announced and
  kept in the history.
"""
