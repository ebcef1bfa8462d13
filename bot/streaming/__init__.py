"""A run's progress streamed as a plan: one message whose tasks follow the loop, then its answer.

Where Slack takes streaming (it needs a thread: channel threads, DMs, the assistant pane), a run
starts one streamed message (``chat.startStream``) whose plan shows the revise-and-grade loop as it
goes — "Writing a draft", "Grading iteration 1/3: 3 of 5 criteria met", "Revising: Clarity" — and
the run's answer closes it (``chat.stopStream``). Each iteration's criteria results and review
buttons are still their own messages, right after it. Where Slack refuses the stream or it dies
(``message_not_in_streaming_state`` past Slack's streaming window), the run goes on without it and
the answer is put into the stream's message with ``chat.update`` (or posted, if that fails too).
The stream's message is in the posted ledger (`bot.db.schema.STREAM_STEP`), so a resumed run,
here or in another process, puts its answer there instead of starting a second stream.
`RUBRIC_BOT_STREAMING=off` turns it off.

- ``plan``: the plan's tasks for each step of the loop, as Slack's task chunks (pure).
- ``stream``: one streamed message: started, appended to while Slack takes it, closed with the answer.
- ``progress``: the thread's progress (status, else ⏳) plus the streamed plan, for the runner.
"""
