"""`rubric-bot` in the terminal: one module per subcommand.

- ``main``: the parser, the subcommand registry, exit codes and every subcommand but replay.
- ``replay``: `rubric-bot replay`: grade the team's reviewed iterations again with a candidate.
"""
