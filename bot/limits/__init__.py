"""Daily limits on what the bot spends, and the usage they are counted from.

- ``quota``: the daily request limit per person and token budget per channel, checked when a
  request is accepted (before any model call), and the reply a refused request gets.
- ``usage``: requests, tokens and money per day, channel and person from the recorded runs,
  rendered for `/rubric usage` and `rubric-bot usage`.
- ``prices``: what a run's tokens cost in US dollars (genai-prices' bundled table), per role, with
  the raw counts kept; a model the table does not know is unpriced, never free.
"""
