"""Thread messages and the rubric UI: pure functions from evaluations, answers and rubrics to Slack payloads.

A *message* here is a :class:`bot.slack.messages.SlackMessage`, ready to splat into
``chat.postMessage``/``chat.update``: notification text, blocks and, where noted, metadata.
The builders and Slack's limits come from :mod:`bot.slack.blocks`. Nothing here does I/O.

The bot's own texts are mrkdwn, with every user- or model-written string in them escaped (see
:mod:`bot.slack.mrkdwn`), so a gap or a criterion cannot mention ``@channel`` or forge links. The
worker's answer and the grader's explanation are model-written Markdown: they go into ``markdown``
blocks as written, with their mentions made inert (see :mod:`bot.slack.markdown`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.messages import UsageMetadata
from slack_sdk.models.blocks import Block, InputBlock, PlainTextInputElement
from slack_sdk.models.views import View

from bot.limits.prices import RunCost, cost_words
from bot.slack.blocks import (
    MARKDOWN_MESSAGE_BUDGET,
    MESSAGE_TEXT_BUDGET,
    PLAIN_TEXT_INPUT_MAX,
    block_dicts,
    code,
    context_block,
    header_block,
    markdown_block,
    plural,
    section_block,
    sections,
    text_length,
)
from bot.slack.markdown import inert_mentions, split_markdown, truncate_markdown
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import SECTION_TEXT_MAX, escape, truncate
from bot.vocabulary.unread import Unread
from grading import CriterionResult, RubricEvaluation, Status
from grading.rubric import MAX_RUBRIC_CHARS, Dimension, Rubric

__all__ = [
    "MODAL_BLOCK_ID",
    "MODAL_CALLBACK_ID",
    "MODAL_INPUT_ACTION_ID",
    "error_message",
    "evaluation_message",
    "final_messages",
    "help_text",
    "no_rubric_hint",
    "rubric_confirmation",
    "rubric_error",
    "rubric_modal",
    "status_words",
    "usage_words",
]

# --- Sizes this renderer chooses ------------------------------------------------------------

CRITERION_NAME_MAX = 500
"""Longest criterion name shown on an evaluation; longer ones are shortened with an ellipsis."""

EXPLANATION_MAX = 2500
"""Longest grader explanation shown on an evaluation; it must share the message with every
criterion, so it is kept to a few paragraphs."""

FLAGGED_HEADING = "*The grader also flagged* (not in the rubric, so not part of the verdict):"
"""Heads the items a grader returned that match no criterion, listed under the criteria."""

ANCHOR_PREVIEW_MAX = 160
"""Longest anchor or description text quoted back when confirming a scored rubric."""

EMPTY_ANSWER = "_The answer was empty._"
"""Shown in place of an answer the worker left empty (Slack refuses an empty markdown block)."""

FALLBACK_PREVIEW_MAX = 300
"""How much of an answer goes into a final message's notification text."""

MODAL_CALLBACK_ID = "rubric_edit"
"""callback_id of the channel-rubric modal; its private_metadata is ``{"channel": id}``."""

MODAL_BLOCK_ID = "rubric"
"""block_id of the rubric input in the modal (``view.state.values[block][action]``)."""

MODAL_INPUT_ACTION_ID = "rubric_text"
"""action_id of the rubric input in the modal."""

EVALUATION_EVENT = "rubric_evaluation"
"""Message metadata event_type of per-iteration evaluation messages."""

FINAL_EVENT = "rubric_final"
"""Message metadata event_type of the first final-answer message."""

PLAIN_STATUS = "plain"
"""Status put in final-message metadata when the run had no rubric (Slack wants no nulls)."""

# --- Words -------------------------------------------------------------------------------------

STATUS_WORDS: Mapping[str, tuple[str, str]] = {
    "satisfied": ("✅", "Rubric satisfied"),
    "needs_revision": ("🔁", "Needs revision"),
    "max_iterations_reached": ("⏹️", "Max iterations reached"),
    "failed": ("❌", "Failed"),
    "grader_error": ("⚠️", "Grader error"),
}
"""Emoji and words for an iteration's result and a run's final status."""

VERDICT_EMOJI: Mapping[str, str] = {"PASS": "✅", "REVIEW": "🟡", "FAIL": "❌"}
"""Emoji next to a scored rubric's aggregate verdict."""

AGGREGATION_WORDS: Mapping[str, str] = {
    "weighted": "weighted average; any score under its floor fails the answer",
    "min": "the weakest dimension decides",
    "per_dimension": "every dimension must reach the pass score",
}
"""How each aggregation rule reads in a rubric confirmation."""

RUBRIC_FORMAT_HINT = (
    "One criterion per line (each pass/fail), or YAML with `dimensions:` "
    "(name, weight, fail_below, anchors for 1/3/5) for scored rubrics."
)
"""How to write a rubric, in one sentence."""


# --- Evaluation messages ---------------------------------------------------------------------


def evaluation_message(evaluation: RubricEvaluation, *, review: Sequence[Block] = ()) -> SlackMessage:
    """One grader iteration as a message: verdict, every criterion, gaps, explanation, and at the
    end the ``review`` blocks (the team review's tally and buttons, see :mod:`bot.review.controls`).

    Every criterion is listed; when the whole would pass Slack's limits, the longest gaps are
    shortened first, each to the same share of the room left (see MESSAGE_TEXT_BUDGET).
    """
    position = f"{evaluation['iteration'] + 1}/{evaluation['max_iterations']}"
    emoji, words = status_words(evaluation["result"])
    criteria = evaluation["criteria"]
    scored = evaluation["kind"] == "scored"

    head: list[Block] = [header_block(f"{emoji} Iteration {position} · {words}")]
    if scored and evaluation["score"] is not None:
        head.append(section_block(_score_line(evaluation["score"], evaluation["verdict"])))
    tail: list[Block] = []
    explanation = evaluation["explanation"].strip()
    if explanation:
        text = truncate_markdown(inert_mentions(explanation), EXPLANATION_MAX)
        tail.append(markdown_block(f"**Grader's explanation**\n\n{text}"))
    notes = [grader_effort_words(evaluation)] if evaluation["grader_calls"] or evaluation["usage"] else []
    if evaluation["calibration"]:
        count = len(evaluation["calibration"])
        notes.append(f"Calibrated with {plural(count, 'team review example')}")
    if notes:
        tail.append(context_block(" · ".join(notes)))
    tail += review

    flagged = evaluation["unmatched"]
    head_dicts, tail_dicts = block_dicts(head), block_dicts(tail)
    room = (
        MESSAGE_TEXT_BUDGET
        - text_length(head_dicts + tail_dicts)
        - (len(FLAGGED_HEADING) + 2) * bool(flagged)
    )
    entries = _criterion_entries([*criteria, *flagged], scored, room)
    if flagged:
        entries.insert(len(criteria), f"\n{FLAGGED_HEADING}")
    body = [section_block(text) for text in _pack(entries)]
    summary = "; ".join(filter(None, (_outcome_words(evaluation, criteria), flagged_words(evaluation))))
    return {
        "text": f"Iteration {position}: {words} — {summary}",
        "blocks": head_dicts + block_dicts(body) + tail_dicts,
        "metadata": {
            "event_type": EVALUATION_EVENT,
            "event_payload": {
                "grading_run_id": evaluation["grading_run_id"],
                "iteration": evaluation["iteration"],
            },
        },
    }


def _criterion_entries(criteria: Sequence[CriterionResult], scored: bool, room: int) -> list[str]:
    """One mrkdwn entry per criterion (mark, name, score, quoted gap), sized to share ``room``."""
    names = [escape(c["name"]) for c in criteria]
    name_cap = _fair_cap([len(n) for n in names], room // 2)
    name_cap = CRITERION_NAME_MAX if name_cap is None else min(name_cap, CRITERION_NAME_MAX)
    heads = [_criterion_head(c, truncate(n, name_cap), scored) for c, n in zip(criteria, names, strict=True)]
    gaps = [_quoted_gap(c) for c in criteria]
    # Each entry costs its head, a newline before its gap and one joining it to the next.
    gap_room = room - sum(len(h) + 2 for h in heads)
    gap_cap = _fair_cap([len(g) for g in gaps], max(gap_room, 0))
    entries = []
    for head, gap in zip(heads, gaps, strict=True):
        cap = SECTION_TEXT_MAX - len(head) - 1
        if gap_cap is not None:
            cap = min(cap, gap_cap)
        entries.append(f"{head}\n{truncate(gap, cap)}" if gap and cap > 0 else head)
    return entries


CANNOT_TELL_MARK = "❔ can't tell:"
"""How a criterion the grader could not tell is marked: it waits for a person's verdict."""


def _criterion_head(criterion: CriterionResult, name: str, scored: bool) -> str:
    if criterion.get("cannot_tell"):
        return f"{CANNOT_TELL_MARK} {name}"
    mark = "✅" if criterion["passed"] else "❌"
    if not scored:
        return f"{mark} {name}"
    score = criterion["score"]
    return f"{mark} {name} — *{score}/5*" if score is not None else f"{mark} {name} — no score"


def _quoted_gap(criterion: CriterionResult) -> str:
    """The grader's gap for a failing criterion as a Slack quote ('' when it passed)."""
    gap = criterion["gap"].strip()
    if criterion["passed"] or not gap:
        return ""
    return "\n".join(f"> {escape(line)}" for line in gap.splitlines() if line.strip())


def _fair_cap(lengths: Sequence[int], room: int) -> int | None:
    """The largest per-item cap c with ``sum(min(length, c)) <= room``; None if all fit whole.

    Short items stay whole and the long ones share what is left equally.
    """
    if sum(lengths) <= room:
        return None
    ordered = sorted(lengths)
    for index, length in enumerate(ordered):
        share = room // (len(ordered) - index)
        if length > share:
            return share
        room -= length
    return None  # unreachable: the lengths did not fit, so some item exceeds its share


def _pack(entries: Iterable[str], limit: int = SECTION_TEXT_MAX) -> list[str]:
    """Join entries with newlines into as few texts of at most ``limit`` as order allows."""
    texts: list[str] = []
    for entry in entries:
        if texts and len(texts[-1]) + 1 + len(entry) <= limit:
            texts[-1] += "\n" + entry
        else:
            texts.append(entry)
    return texts


def _score_line(score: float, verdict: str | None) -> str:
    parts = [f"*Score {_number(score)}/5*"]
    if verdict:
        parts.append(" ".join(filter(None, (VERDICT_EMOJI.get(verdict), f"*{verdict}*"))))
    return " · ".join(parts)


def _outcome_words(evaluation: RubricEvaluation, criteria: Sequence[CriterionResult]) -> str:
    if evaluation["kind"] == "scored" and evaluation["score"] is not None:
        verdict = evaluation["verdict"]
        return f"score {_number(evaluation['score'])}/5" + (f" ({verdict})" if verdict else "")
    passed = sum(1 for c in criteria if c["passed"])
    words = f"{passed} of {len(criteria)} criteria passed"
    open_ = sum(1 for c in criteria if c.get("cannot_tell"))
    return f"{words}, {open_} can't tell (a person's call)" if open_ else words


def flagged_words(evaluation: RubricEvaluation) -> str | None:
    """``the grader also flagged 2 failing items outside the rubric``; None when none fail."""
    failing = sum(1 for item in evaluation["unmatched"] if not item["passed"])
    if not failing:
        return None
    return f"the grader also flagged {plural(failing, 'failing item')} outside the rubric"


# --- Final answer ------------------------------------------------------------------------------


def final_messages(
    status: Status | None,
    answer_markdown: str,
    *,
    iterations: int | None,
    max_iterations: int | None,
    best_iteration: int | None = None,
    usage: UsageMetadata | None = None,
    cost: RunCost | None = None,
    open_criteria: Sequence[str] = (),
) -> list[SlackMessage]:
    """The run's outcome and the full answer, split over as many messages as Slack needs.

    ``status`` is the run's final status (None when the thread has no rubric: the answer
    alone). ``iterations`` counts grader iterations run; ``best_iteration`` is 0-based like an
    evaluation's ``iteration``. The answer goes into ``markdown`` blocks as the worker wrote it,
    mentions made inert; nothing of it is cut: each message holds one markdown block and at most
    MARKDOWN_MESSAGE_BUDGET characters in all, and the answer goes on in as many as it needs.
    ``open_criteria`` are those the grader could not tell in the last iteration: named as waiting
    for a person.
    """
    lead = _status_lines(status, iterations, max_iterations, best_iteration)
    if open_criteria:
        lead += "\n" + _open_line(open_criteria)
    closing = context_block(run_words(usage, iterations, cost)) if usage else None
    room = MARKDOWN_MESSAGE_BUDGET - len(lead) - (text_length(closing.to_dict()) if closing else 0)
    pieces = split_markdown(inert_mentions(answer_markdown), room) or [EMPTY_ANSWER]

    messages: list[SlackMessage] = []
    for number, piece in enumerate(pieces, start=1):
        blocks: list[Block] = [markdown_block(piece)]
        if number == 1 and lead:
            blocks.insert(0, section_block(lead))
        if number == len(pieces) and closing:
            blocks.append(closing)
        text = f"(continued, part {number} of {len(pieces)})"
        messages.append({"text": text, "blocks": block_dicts(blocks)})

    preview = truncate(escape(pieces[0]), FALLBACK_PREVIEW_MAX)
    headline = _status_headline(status, iterations, max_iterations)
    messages[0]["text"] = f"{headline}: {preview}" if headline else preview
    messages[0]["metadata"] = {
        "event_type": FINAL_EVENT,
        "event_payload": {"status": status or PLAIN_STATUS},
    }
    return messages


def _status_headline(status: Status | None, iterations: int | None, max_iterations: int | None) -> str:
    """E.g. ``Max iterations reached (3/3)``; '' when there is no status."""
    if status is None:
        return ""
    _, words = status_words(status)
    if iterations is not None and max_iterations is not None:
        words += f" ({iterations}/{max_iterations})"
    return words


def _status_lines(
    status: Status | None,
    iterations: int | None,
    max_iterations: int | None,
    best_iteration: int | None,
) -> str:
    if status is None:
        return ""
    emoji, _ = status_words(status)
    lines = [f"{emoji} *{_status_headline(status, iterations, max_iterations)}*"]
    if best_iteration is not None:
        of = iterations if iterations is not None else max_iterations
        where = f"iteration {best_iteration + 1}" + (f" of {of}" if of is not None else "")
        lines.append(f"_Showing the best answer ({where})_")
    return "\n".join(lines)


def _open_line(names: Sequence[str]) -> str:
    """The criteria left to a person, named (each bounded) so the thread knows what to review."""
    listed = "; ".join(escape(truncate(name, CRITERION_NAME_MAX)) for name in names)
    count = plural(len(names), "criterion", "criteria")
    return f"❔ _The grader could not tell {count}; a person's verdict is needed:_ {listed}"


# --- Rubric messages ----------------------------------------------------------------------------


def rubric_confirmation(rubric: Rubric) -> SlackMessage:
    """Confirms a new rubric by listing what was parsed, plus any lint warnings."""
    count, summary, items = _rubric_listing(rubric)
    warnings = [f"⚠️ {escape(w)}" for w in rubric.warnings]
    text = "\n".join([f"*Rubric set* — {summary}:", *items, *warnings])
    return {
        "text": f"Rubric set: {count}",
        "blocks": block_dicts(sections(truncate(text, MESSAGE_TEXT_BUDGET))),
    }


def rubric_forgotten(*, channel_default: bool) -> SlackMessage:
    """Tells a thread that the message which set its rubric was deleted, and what grades it now."""
    now = (
        "Answers here are graded against this channel's default rubric again."
        if channel_default
        else f"Answers here are not graded until a new rubric is set. {HOW_TO_SET_A_RUBRIC}"
    )
    text = f"🗑️ *The message that set this thread's rubric was deleted*, so I forgot that rubric. {now}"
    return {"text": "This thread's rubric was deleted", "blocks": block_dicts([section_block(text)])}


def request_prompt(rubric: Rubric | None, *, scope: str) -> SlackMessage:
    """Answers a mention with nothing to do: asks for the request, naming the rubric that will grade it.

    ``scope`` says whose rubric it is: ``thread`` (set with `rubric:`) or ``channel`` (the default).
    """
    ask = "*What should I do?* Reply in this thread with your request."
    if rubric is None:
        return {"text": REQUEST_PROMPT, "blocks": block_dicts([section_block(f"{ask}\n{NO_RUBRIC_YET}")])}
    count, summary, items = _rubric_listing(rubric)
    whose = "this thread's rubric" if scope == "thread" else "this channel's default rubric"
    listing = "\n".join([ask, f"I'll grade my answer against {whose} — {summary}:", *items])
    room = MESSAGE_TEXT_BUDGET - len(CHANGE_RUBRIC_HINT)
    return {
        "text": f"{REQUEST_PROMPT} Answers here are graded against {whose} ({count}).",
        "blocks": block_dicts([*sections(truncate(listing, room)), context_block(CHANGE_RUBRIC_HINT)]),
    }


def _rubric_listing(rubric: Rubric) -> tuple[str, str, list[str]]:
    """A rubric's size (``2 criteria``), its one-line summary and one bullet per criterion or dimension."""
    if rubric.is_scored:
        count = plural(len(rubric.dimensions), "scored dimension")
        aggregation = AGGREGATION_WORDS.get(rubric.aggregation, rubric.aggregation)
        summary = f"{count} (1–5), {aggregation}; passes at {_number(rubric.pass_score)}/5"
        weights = rubric.weights()
        return count, summary, [_dimension_lines(d, weights.get(d.name)) for d in rubric.dimensions]
    count = plural(len(rubric.criteria), "criterion", "criteria")
    return count, f"{count}, each pass/fail", [f"• {escape(c.name)}" for c in rubric.criteria]


def _dimension_lines(dimension: Dimension, weight: float | None) -> str:
    facts = []
    if weight is not None:
        facts.append(f"weight {weight:.0%}")
    if dimension.fail_below is not None:
        facts.append(f"fails below {dimension.fail_below}")
    line = f"• *{escape(dimension.name)}*" + (f" ({', '.join(facts)})" if facts else "")
    if dimension.description:
        line += f" — {truncate(escape(dimension.description), ANCHOR_PREVIEW_MAX)}"
    anchors = [
        f"{score}: {truncate(escape(text), ANCHOR_PREVIEW_MAX)}"
        for score, text in sorted(dimension.anchors.items(), reverse=True)
    ]
    return line + ("\n      " + " · ".join(anchors) if anchors else "")


def rubric_error(error: str) -> SlackMessage:
    """Answers a rubric that did not parse; the thread keeps its previous rubric."""
    lead = "⚠️ That rubric didn't parse, so the previous rubric is still in place:"
    return {
        "text": f"That rubric didn't parse: {truncate(escape(error), FALLBACK_PREVIEW_MAX)}",
        "blocks": block_dicts([section_block(f"{lead}\n{code(error)}"), context_block(RUBRIC_FORMAT_HINT)]),
    }


REQUEST_PROMPT = "What should I do? Reply in this thread with your request."
"""What the bot asks when it is mentioned with nothing to do (the notification text)."""

CHANGE_RUBRIC_HINT = "_Start a message with `rubric:` to grade this thread against a different rubric._"
"""Tells a thread that already has a rubric how to use another."""

HOW_TO_SET_A_RUBRIC = (
    "Start a message with `rubric:` in this thread to set one, or set a channel default with `/rubric set`."
)
"""The two ways to give a thread a rubric, in one sentence."""

NO_RUBRIC_YET = f"_There's no rubric here yet, so answers are not graded. {HOW_TO_SET_A_RUBRIC}_"
"""Tells a thread without a rubric, before any answer, how to get one."""


def unread_note(unread: Sequence[Unread]) -> str:
    """What a request shared that was not read, one line each with the reason (a context line's mrkdwn)."""
    return "\n".join(f":warning: Not read: *{escape(item.name)}*: {escape(item.reason)}" for item in unread)


def no_rubric_hint() -> str:
    """One line telling a thread without a rubric how to get one."""
    return f"_No rubric here, so this answer wasn't graded. {HOW_TO_SET_A_RUBRIC}_"


def error_message(summary: str, detail: str | None) -> SlackMessage:
    """A model or grader failure in a thread, e.g. summary ``The grader failed: timed out``."""
    text = f"⚠️ *{escape(summary)}*"
    if detail:
        text += f"\n{code(detail)}"
    return {
        "text": summary,
        "blocks": block_dicts(
            [
                section_block(truncate(text, SECTION_TEXT_MAX)),
                context_block("The thread's rubric and history are kept; reply here to try again."),
            ]
        ),
    }


def help_text(subcommands: Sequence[tuple[str, str]]) -> str:
    """The ``/rubric help`` text, listing each subcommand's (usage, what it does) in order."""
    lines = ["*`/rubric` — how this channel's answers are graded*"]
    lines += [f"• `{usage}` — {what}" for usage, what in subcommands]
    lines += [
        "In a thread, start a message with `rubric:` to set or replace that thread's rubric.",
        RUBRIC_FORMAT_HINT,
    ]
    return "\n".join(lines)


def rubric_modal(current: str | None, *, channel_id: str) -> dict[str, Any]:
    """The modal for editing a channel's default rubric, pre-filled with the current one.

    A current rubric longer than Slack lets an input hold is not pre-filled (it would be cut on
    saving); the modal says so instead.
    """
    limit = min(MAX_RUBRIC_CHARS, PLAIN_TEXT_INPUT_MAX)
    fits = current is not None and len(current) <= limit
    blocks: list[Block] = []
    if current is not None and not fits:
        blocks.append(
            section_block(
                f"The current rubric is {len(current):,} characters, more than this form holds "
                f"({limit:,}); replace it here, or use `/rubric set` for a longer one."
            )
        )
    blocks.append(
        InputBlock(
            block_id=MODAL_BLOCK_ID,
            label="Rubric",
            hint=RUBRIC_FORMAT_HINT.replace("`", ""),
            element=PlainTextInputElement(
                action_id=MODAL_INPUT_ACTION_ID,
                multiline=True,
                initial_value=current if fits else None,
                max_length=limit,
            ),
        )
    )
    view = View(
        type="modal",
        callback_id=MODAL_CALLBACK_ID,
        title="Channel rubric",
        submit="Save",
        close="Cancel",
        private_metadata=json.dumps({"channel": channel_id}),
        blocks=blocks,
    )
    return view.to_dict()


# --- Words shared with the terminal and the Home tab ----------------------------------------------


def status_words(status: str) -> tuple[str, str]:
    """Emoji and words for a grading status, e.g. ``("✅", "Rubric satisfied")``."""
    return STATUS_WORDS.get(status, ("ℹ️", status.replace("_", " ").capitalize()))


def grader_effort_words(evaluation: RubricEvaluation) -> str:
    """What grading the iteration took: ``Grader: 2 calls · 1,234 in · 56 out``."""
    calls = evaluation["grader_calls"]
    parts = [plural(calls, "call")] if calls else []
    if evaluation["usage"]:
        parts.append(usage_words(evaluation["usage"]))
    return "Grader: " + " · ".join(parts)


def run_words(usage: UsageMetadata, iterations: int | None, cost: RunCost | None) -> str:
    """The run's closing line: ``Tokens this run: 1,234 in (800 cached) · 56 out · 2 iterations ·
    $0.0012``; its cost says "unpriced" for a model the price table does not know."""
    parts = [usage_words(usage)]
    if iterations:
        parts.append(plural(iterations, "iteration"))
    if cost is not None:
        parts.append(cost_words(cost))
    return "Tokens this run: " + " · ".join(parts)


def usage_words(usage: UsageMetadata) -> str:
    """Token usage as ``1,234 in · 56 out``, with ``(800 cached)`` after the input when the
    provider served some of it from its prompt cache."""
    cached = (usage.get("input_token_details") or {}).get("cache_read") or 0
    cached_words = f" ({cached:,} cached)" if cached else ""
    return f"{usage.get('input_tokens', 0):,} in{cached_words} · {usage.get('output_tokens', 0):,} out"


def _number(value: float) -> str:
    """2 decimals at most, no trailing zeros: 3.85, 4, 4.5."""
    return f"{round(value, 2):g}"
