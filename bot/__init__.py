"""rubric-bot: the Slack adapter that runs the grading engine in Slack threads."""
