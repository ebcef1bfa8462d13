"""What people shared in Slack, read for a request: the thread the bot is called into, and attached files.

It reaches the worker and the grader as delimited material, never as instructions.

- ``fence``: the delimiters around shared material (tags with a fresh random code).
- ``thread``: a thread's earlier messages: fetched (``conversations.replies``, authors' names) and
  bounded to the most recent characters.
- ``files``: attached files: which can be read, downloading them with the bot token, their text.
- ``pdf``: a PDF's text, extracted in a child process bounded in memory, time, pages and text.
- ``sources``: what a request asks to have read (`Sources`: its files), carried by its job.
- ``reader``: reading it (`MaterialReader`) into what the conversation gets (`Material`).
"""
