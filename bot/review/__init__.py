"""Team review of the grader: verdicts, the tally, the buttons and form, and calibration.

- ``review``: what a verdict means, the Agree / Disagree… buttons, the tally, the review form,
  saving a review, and the team's disagreements as worked examples for the grader.
"""
