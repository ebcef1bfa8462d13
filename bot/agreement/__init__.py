"""How far the grader agrees with the team, and whether another grader would agree more.

- ``pooling``: a criterion's verdicts pooled over the rubric versions in which its text is unchanged,
  per grader model, with its coverage by run (the report's unit; reusable by anything per criterion).
- ``report``: the agreement report per criterion, from the store: Slack blocks and terminal table.
- ``people``: how far people agree with each other (iterations two people reviewed) beside the grader's
  agreement, compared per criterion; and how many reviews were one-click Agrees or blind.
- ``trust_figures``: under a channel's trust level, per criterion: threshold, coverage, agreement on
  the verdicts acted on and whether the target holds; the reviewed cases the thresholds calibrate on.
- ``report_chart``: the report's chart (κ with its interval, agreement against the baseline) as PNG.
- ``replay``: the replay engine: reviewed iterations rebuilt and graded again by a candidate.
- ``comparison``: a replayed grader's agreement next to the original's (Slack, terminal, JSON, chart).
- ``channel_replay``: `/rubric replay` in the background, one per channel.
- ``budget``: a channel replay inside the day's budgets: each grader call reserved, then settled.
- ``presentation``: the shared wording (kinds, shares, κ, periods, names) and the terminal's aligned table.
- ``charts``: the shared two-panel chart (κ beside agreement) and its pieces, rendered to PNG.
"""
