"""A run's results in its thread: each iteration's evaluation, the final answer, and the words for
a status, a run's tokens and cost (shared with the terminal and the Home tab).

A *message* here is a :class:`bot.slack.messages.SlackMessage`, ready to splat into
``chat.postMessage``/``chat.update``: notification text, blocks and, where noted, metadata.
The builders and Slack's limits come from :mod:`bot.slack.blocks`. Nothing here does I/O.

The bot's own texts are mrkdwn, with every user- or model-written string in them escaped (see
:mod:`bot.slack.mrkdwn`), so a gap or a criterion cannot mention ``@channel`` or forge links. The
worker's answer and the grader's explanation are model-written Markdown: they go into ``markdown``
blocks as written, with their mentions made inert (see :mod:`bot.slack.markdown`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from langchain_core.messages import UsageMetadata
from slack_sdk.models.blocks import Block

from bot.limits.prices import RunCost, cost_words
from bot.slack.blocks import (
    MARKDOWN_MESSAGE_BUDGET,
    MESSAGE_TEXT_BUDGET,
    block_dicts,
    context_block,
    header_block,
    markdown_block,
    plural,
    section_block,
    text_length,
)
from bot.slack.markdown import inert_mentions, split_markdown, truncate_markdown
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import SECTION_TEXT_MAX, escape, truncate
from bot.vocabulary.unread import Unread
from grading import CriterionResult, RubricEvaluation, Status

CRITERION_NAME_MAX = 500
"""Longest criterion name shown on an evaluation; longer ones are shortened with an ellipsis."""

EXPLANATION_MAX = 2500
"""Longest grader explanation shown on an evaluation; it must share the message with every
criterion, so it is kept to a few paragraphs."""

FLAGGED_HEADING = "*The grader also flagged* (not in the rubric, so not part of the verdict):"
"""Heads the items a grader returned that match no criterion, listed under the criteria."""

EMPTY_ANSWER = "_The answer was empty._"
"""Shown in place of an answer the worker left empty (Slack refuses an empty markdown block)."""

FALLBACK_PREVIEW_MAX = 300
"""How much of an answer goes into a final message's notification text."""

EVALUATION_EVENT = "rubric_evaluation"
"""Message metadata event_type of per-iteration evaluation messages."""

FINAL_EVENT = "rubric_final"
"""Message metadata event_type of the first final-answer message."""

PLAIN_STATUS = "plain"
"""Status put in final-message metadata when the run had no rubric (Slack wants no nulls)."""

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


def evaluation_message(
    evaluation: RubricEvaluation, *, review: Sequence[Block] = (), rubric_version: str | None = None
) -> SlackMessage:
    """One grader iteration as a message: verdict, every criterion, gaps, explanation, a quiet line
    naming where the verdict came from (`source_words`), and at the end the ``review`` blocks (the
    team review's tally and buttons, see :mod:`bot.review.controls`).

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
    if source := source_words(evaluation, rubric_version):
        tail.append(context_block(source))
    tail += review

    flagged = evaluation["unmatched"]
    head_dicts, tail_dicts = block_dicts(head), block_dicts(tail)
    room = (
        MESSAGE_TEXT_BUDGET
        - text_length(head_dicts + tail_dicts)
        - (len(FLAGGED_HEADING) + 2) * bool(flagged)
    )
    samples = evaluation.get("provenance", {}).get("samples", 1)
    entries = _criterion_entries([*criteria, *flagged], scored, room, samples)
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


def source_words(evaluation: RubricEvaluation, rubric_version: str | None) -> str:
    """Where the verdict came from, e.g. ``Rubric v3 · grader gpt-4o-mini-2024-07-18 · 3 samples,
    split on 1 criterion`` ('' for an evaluation without provenance and no version given)."""
    provenance = evaluation.get("provenance")
    parts = [f"Rubric {escape(rubric_version)}"] if rubric_version else []
    if provenance:
        parts.append(f"grader {escape(provenance['grader_model'])}")
        samples = provenance.get("samples", 1)
        if samples > 1:
            split = sum(1 for c in evaluation["criteria"] if c.get("confidence", 1.0) < 1)
            agreed = "unanimous" if not split else f"split on {plural(split, 'criterion', 'criteria')}"
            parts.append(f"{samples} samples, {agreed}")
    return " · ".join(parts)


def _criterion_entries(
    criteria: Sequence[CriterionResult], scored: bool, room: int, samples: int = 1
) -> list[str]:
    """One mrkdwn entry per criterion (mark, name, score, how sure, quoted gap), sized to share ``room``."""
    names = [escape(c["name"]) for c in criteria]
    name_cap = _fair_cap([len(n) for n in names], room // 2)
    name_cap = CRITERION_NAME_MAX if name_cap is None else min(name_cap, CRITERION_NAME_MAX)
    heads = [
        _criterion_head(c, truncate(n, name_cap), scored) + _sureness_words(c, samples)
        for c, n in zip(criteria, names, strict=True)
    ]
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


def _sureness_words(criterion: CriterionResult, samples: int) -> str:
    """How sure the grader was, where it was not unanimous: `` · 2 of 3 samples`` (the verdict's
    confidence, as the count it is a share of), or that the escalation model gave the verdict."""
    if criterion.get("escalated"):
        return " · _samples split: regraded by the escalation model_"
    confidence = criterion.get("confidence", 1.0)
    if samples < 2 or confidence >= 1:
        return ""
    return f" · _{round(confidence * samples)} of {samples} samples_"


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
    parts = [f"*Score {short_number(score)}/5*"]
    if verdict:
        parts.append(" ".join(filter(None, (VERDICT_EMOJI.get(verdict), f"*{verdict}*"))))
    return " · ".join(parts)


def _outcome_words(evaluation: RubricEvaluation, criteria: Sequence[CriterionResult]) -> str:
    if evaluation["kind"] == "scored" and evaluation["score"] is not None:
        verdict = evaluation["verdict"]
        return f"score {short_number(evaluation['score'])}/5" + (f" ({verdict})" if verdict else "")
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


STOPPED_STATUS = "stopped"
"""Status put in the final-message metadata of a run a person stopped."""


def stopped_messages(
    person: str, answer_markdown: str | None, *, iterations: int, max_iterations: int | None
) -> list[SlackMessage]:
    """A stopped run's closing message: who stopped it and when, then the best draft so far (if
    the worker wrote one), split as `final_messages` splits an answer."""
    if iterations and max_iterations:
        when = f"after iteration {iterations} of {max_iterations}"
    else:
        when = "before the grader saw a draft"
    line = f"✋ Stopped by <@{person}> {when}"
    if not answer_markdown:
        messages: list[SlackMessage] = [
            {"text": f"{line}.", "blocks": block_dicts([section_block(f"{line}; nothing was answered.")])}
        ]
    else:
        messages = final_messages(None, answer_markdown, iterations=iterations, max_iterations=max_iterations)
        first = messages[0]
        lead = section_block(f"{line}; the best draft so far is below.").to_dict()
        messages[0] = {
            **first,
            "text": f"{line}: {first['text']}",
            "blocks": [lead, *first.get("blocks", [])],
        }
    messages[0]["metadata"] = {"event_type": FINAL_EVENT, "event_payload": {"status": STOPPED_STATUS}}
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


def unread_note(unread: Sequence[Unread]) -> str:
    """What a request shared that was not read, one line each with the reason (a context line's mrkdwn)."""
    return "\n".join(f":warning: Not read: *{escape(item.name)}*: {escape(item.reason)}" for item in unread)


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


def short_number(value: float) -> str:
    """2 decimals at most, no trailing zeros: 3.85, 4, 4.5."""
    return f"{round(value, 2):g}"
