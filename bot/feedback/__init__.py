"""People's verdicts on the bot's answers: 👍/👎 on each run's final answer (Slack's feedback buttons).

A reviewer's Agree / Disagree judges the grader; these judge the answer. A click is saved per person
(the last one counts) and acknowledged to the clicker alone; the channel's report, Home and
`rubric-bot report` show the askers' satisfaction beside the grader's pass rate, and how often an
answer the grader passed got a 👎; the export carries each run's votes (``asker_feedback``). A vote
is never a review of the grader and never calibrates it.

- ``buttons``: the feedback buttons on a final answer, their values, and what a click is told (pure).
- ``satisfaction``: a channel's votes and pass rate as rates with their count and 95 % interval.
"""
