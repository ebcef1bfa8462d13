"""Trust levels a team sets per channel: the grader acts alone only where its confidence clears a
threshold its trusted reviews show can be trusted at the channel's target.

- ``thresholds``: each criterion's threshold recalibrated from the channel's trusted reviews (pooled
  per criterion and grader model, `grading.selective.calibrate`) and stored; the runs' trust source.
- ``level``: `/rubric trust [level|off]`: reading the level, an editor's change stored, announced in
  the channel and kept in the history; what the channel's level is.
"""
