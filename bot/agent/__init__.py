"""The agent: the worker with the rubric grader, its models, and one turn of a conversation with it.

- ``models``: the chat models a deployment runs, loaded once at start-up; a bad one is a `ConfigError`
  naming its setting.
- ``openai_json``: OpenAI chat models that hand the SDK their messages and tools as ready JSON (its
  parameter walk skipped).
- ``worker``: the worker agent with the rubric grader on the configured models and the checkpointer,
  one per pair of models in use.
- ``turn``: one turn with the agent, its grader iterations reported as they happen, and what the
  finished turn shows (`TurnOutcome`).
- ``summary``: long threads summarized for the worker past `RUBRIC_BOT_CONTEXT_TOKENS`.
"""
