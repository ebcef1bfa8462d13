"""Slack's assistant pane (Agents & AI Apps): the bot beside any channel, in a thread of its own.

Opening the pane (``assistant_thread_started``) greets the person once and offers suggested
prompts. The greeting carries the pane's thread context (which channel it was opened beside) as
message metadata, where Bolt's thread context store keeps it and ``assistant_thread_context_changed``
updates it. A message in the pane is a DM in a thread: it is a request like any other (same loop,
limits, lifecycle and workspace rules), except that a new conversation there takes its default
rubric from the channel beside the pane, and the pane gets a title from the request.

- ``prompts``: the greeting and the suggested prompts, and the prompts the bot answers itself (pure).
- ``pane``: opening the pane (greeted once), the channel beside a pane thread, its title, and the
  answers to the prompts that are questions, not requests.
"""
