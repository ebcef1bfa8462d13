"""No grader change without a replay: in a place with trusted reviews, a new rubric (`/rubric set`,
the editor, `/rubric revert`), a workspace's new grader model (`/rubric admin`) and a calibration
drop are first replayed against those reviews and change nothing until an editor clicks Apply;
`/rubric set!` skips the replay and says so.

- ``replaying``: the trusted reviewed cases, the candidate each proposal grades them with, the
  replay (the channel replay's, budget-checked) and its one-line summary for the history.
- ``messages``: the proposal's message — per criterion agreement and κ before → after with the
  interval of each difference and its count, the flips linked and fenced, Apply / Cancel.
- ``proposing``: holding a change: the stored proposal, its replay in the background, the offer.
- ``deciding``: Apply or Cancel: who may, stale proposals refused, the change applied and announced.
"""
