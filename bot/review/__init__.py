"""Team review of the grader: verdicts, the tally and buttons, the form, saving, and calibration.

The listeners call in here; :mod:`bot.rendering.results` receives the review's blocks ready.

- ``verdicts``: what a verdict is (pass/fail, 1–5), the grader's per criterion, and its label for agreement.
- ``controls``: on an evaluation message: the tally and the Agree / Disagree… (blind: Review…) buttons.
- ``form``: the review modal, pre-set or blind, and reading a submitted one back into verdicts.
- ``modes``: `/rubric review`: blind reviews and double review per channel, and who is asked how.
- ``saving``: saving a reviewer's verdicts and refreshing the message's tally under the iteration's lock;
  what a blind reviewer is shown once saved.
- ``calibration``: the team's latest disagreements as the grader's worked examples.
"""
