"""The review buttons on evaluation messages: Agree records a review, Disagree… (blind: Review…) opens
the form, and Agree too where the reviewer is to judge blind (`bot.review.modes`); the 👍/👎 under a
final answer, which record the clicker's verdict on the answer (`bot.feedback`); and Apply / Cancel on
a proposed grading change (`bot.proposals`).

What a review is, saving it and refreshing its message's tally belong to :mod:`bot.review`; these
listeners read the click and answer the clicker. The form's submission is handled in
:mod:`bot.listeners.views`.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltContext
from slack_sdk.web.async_client import AsyncWebClient

from bot.db.evaluations import EvaluationRecord
from bot.db.reviews import ReviewRow
from bot.db.store import Store
from bot.feedback.buttons import FEEDBACK_ACTION_ID, THANKS, UNKNOWN_RUN, UNREADABLE_FEEDBACK, parse_feedback
from bot.listeners.context import services_of, workspace_of
from bot.proposals.deciding import Deciders, decide
from bot.proposals.messages import APPLY_ACTION_ID, CANCEL_ACTION_ID, decided_blocks
from bot.review.controls import AGREE_ACTION_ID, DISAGREE_ACTION_ID, REVIEW_ACTION_ID, parse_review_value
from bot.review.form import review_modal
from bot.review.modes import ReviewAsk, review_ask
from bot.review.saving import UNKNOWN_EVALUATION, refresh_tally, save_review
from bot.review.verdicts import agree_verdicts
from bot.slack.client import attempt
from bot.slack.payloads import Click, problems
from bot.trust.thresholds import recalibrate_after_review
from bot.vocabulary.workspace import Workspace

logger = logging.getLogger(__name__)

UNKNOWN_PROPOSAL = (
    "I have no record of that proposed change (it may have been erased), so nothing was changed."
)
"""Told to someone whose Apply or Cancel names no proposal the bot has."""

NOTHING_TO_REVIEW = "That grader iteration has no graded criteria, so there is nothing to review."
"""Told to someone who reviews an iteration whose grader gave no verdicts (e.g. a grader error)."""

UNREADABLE_BUTTON = "I can't read which grader iteration that button is for, so it can't be reviewed."
"""Told to someone whose click carries a value no review button of the bot's would have."""

NO_TRIGGER = "Slack sent that click without what a form needs to open. Please click the button again."
"""Told to someone whose click came without a trigger_id, so no form can be opened."""


def register(app: AsyncApp) -> None:
    """Listen to the review buttons."""
    app.action(AGREE_ACTION_ID)(on_agree)
    app.action(DISAGREE_ACTION_ID)(on_disagree)
    app.action(REVIEW_ACTION_ID)(on_disagree)
    app.action(FEEDBACK_ACTION_ID)(on_feedback)
    app.action(APPLY_ACTION_ID)(on_apply)
    app.action(CANCEL_ACTION_ID)(on_cancel)


async def on_apply(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Apply a proposed grading change (an editor; a workspace admin for a grader model)."""
    await on_decision(ack, body, context, client, apply=True)


async def on_cancel(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Cancel a proposed grading change (an editor, or whoever proposed it)."""
    await on_decision(ack, body, context, client, apply=False)


async def on_decision(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient, *, apply: bool
) -> None:
    """Apply or Cancel a proposed grading change; its message then shows the decision (the clicker
    alone is told why when nothing was decided)."""
    await ack()
    try:
        click = Click.model_validate(body)
    except ValidationError as exc:
        logger.warning("ignored an unreadable click on a proposal button: %s", problems(exc))
        return
    services = services_of(context)
    proposal = None
    if click.value.isdecimal():
        proposal = await services.store.proposal(workspace_of(context), int(click.value))
    if proposal is None:
        await tell_clicker(client, click, UNKNOWN_PROPOSAL)
        return
    deciders = Deciders(services.store, services.editors, services.workspaces)
    decided = await decide(deciders, client, proposal, click.user.id, apply=apply)
    if decided.told is not None:
        await tell_clicker(client, click, decided.told)
    shown = body.get("message") or {}
    ts = shown.get("ts") or proposal.message_ts  # a click may beat the record of where it was posted
    if decided.decision is not None and ts is not None:
        blocks = decided_blocks(shown.get("blocks") or [], decided.decision)
        await attempt(
            client.chat_update(channel=proposal.channel, ts=ts, text=decided.decision, blocks=blocks),
            f"show the decision on proposal {proposal.proposal_id}",
        )


async def on_feedback(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Save the clicker's 👍/👎 on the answer (their last click counts) and thank them alone."""
    try:
        click = Click.model_validate(body)
    except ValidationError as exc:
        await ack()
        logger.warning("ignored an unreadable click on a feedback button: %s", problems(exc))
        return
    try:
        run_id, positive = parse_feedback(click.value)
    except ValueError as exc:
        await ack()
        logger.info("a feedback button from %s: %s", click.user.id, exc)
        await tell_clicker(client, click, UNREADABLE_FEEDBACK)
        return
    saved = await services_of(context).store.record_feedback(
        workspace_of(context), run_id, click.user.id, positive=positive
    )
    await ack()  # only now: if the database failed, Slack tells the clicker it did not work
    await tell_clicker(client, click, THANKS[positive] if saved else UNKNOWN_RUN)


async def on_agree(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Record that the clicker accepts every verdict of the iteration, then show the new tally; where
    they are to judge blind (the channel reviews blind, or they are asked for a second review), open
    the blind form instead."""
    store = services_of(context).store
    clicked = await _read_click(ack, store, client, body, workspace_of(context))
    if clicked is None:
        return
    click, record = clicked
    verdicts = agree_verdicts(record.evaluation)
    if not verdicts:
        await ack()
        await tell_clicker(client, click, NOTHING_TO_REVIEW)
        return
    reviews = await store.reviews_for_iteration(
        record.thread.workspace, record.grading_run_id, record.iteration
    )
    modes = await store.review_modes(record.thread.workspace, record.channel)
    ask = review_ask(modes, reviews, record.grading_run_id, record.iteration, click.user.id)
    if ask.blind:
        await ack()
        await _open_form(client, click, record, reviews, ask)
        return
    editor = await services_of(context).editors.is_editor(client, workspace_of(context), click.user.id)
    await save_review(store, record, click.user.id, verdicts, editor=editor, via="agree")
    await ack()  # only now: if the database failed, Slack tells the clicker it did not work
    # Before the tally shows the review: a run started after it sees its thresholds.
    await recalibrate_after_review(
        store, record.thread.workspace, record.channel, services_of(context).settings.trust_risk
    )
    await refresh_tally(store, client, record)


async def on_disagree(
    ack: AsyncAck, body: dict[str, Any], context: AsyncBoltContext, client: AsyncWebClient
) -> None:
    """Open the review form, set to the clicker's earlier review or else to the grader's verdicts (blind:
    to nothing, where the channel reviews blind or the clicker is asked for a second review)."""
    store = services_of(context).store
    clicked = await _read_click(ack, store, client, body, workspace_of(context))
    if clicked is None:
        return
    await ack()
    click, record = clicked
    workspace = record.thread.workspace
    reviews = await store.reviews_for_iteration(workspace, record.grading_run_id, record.iteration)
    modes = await store.review_modes(workspace, record.channel)
    ask = review_ask(modes, reviews, record.grading_run_id, record.iteration, click.user.id)
    await _open_form(client, click, record, reviews, ask)


async def _open_form(
    client: AsyncWebClient, click: Click, record: EvaluationRecord, reviews: list[ReviewRow], ask: ReviewAsk
) -> None:
    """Open the review form of the clicked iteration as ``ask`` says (the click is acked)."""
    if click.trigger_id is None:
        await tell_clicker(client, click, NO_TRIGGER)
        return
    try:
        view = review_modal(
            record.evaluation,
            channel=record.channel,
            message_ts=record.message_ts,
            thread_ts=record.thread_ts,
            previous=[row for row in reviews if row.reviewer == click.user.id],
            blind=ask.blind,
            second=ask.second,
        )
    except ValueError as exc:
        await tell_clicker(client, click, f"This iteration can't be reviewed: {exc}.")
        return
    await attempt(client.views_open(trigger_id=click.trigger_id, view=view), "open the review form")


async def _read_click(
    ack: AsyncAck, store: Store, client: AsyncWebClient, body: dict[str, Any], workspace: Workspace
) -> tuple[Click, EvaluationRecord] | None:
    """Read the click: who clicked, and the evaluation (of the clicker's workspace) their button
    belongs to; the caller acks.

    None, with the click acked, when there is nothing to review; the clicker is told why when the
    payload says who they are (Slack always does), and the log gets one line otherwise.
    """
    try:
        click = Click.model_validate(body)
    except ValidationError as exc:
        await ack()
        logger.warning("ignored an unreadable click on a review button: %s", problems(exc))
        return None
    try:
        grading_run_id, iteration = parse_review_value(click.value)
    except ValueError as exc:
        await ack()
        logger.info("a review button from %s: %s", click.user.id, exc)
        await tell_clicker(client, click, UNREADABLE_BUTTON)
        return None
    record = await store.get_evaluation(workspace, grading_run_id, iteration)
    if record is None:
        await ack()
        await tell_clicker(client, click, UNKNOWN_EVALUATION)
        return None
    return click, record


async def tell_clicker(client: AsyncWebClient, click: Click, text: str) -> None:
    """Answer a button click with a message only the clicker sees, in the message's thread."""
    if click.channel_id is None:  # a click Slack sent without its channel cannot be answered
        logger.info("a button click from %s without its channel: %s", click.user.id, text)
        return
    await attempt(
        client.chat_postEphemeral(
            channel=click.channel_id, user=click.user.id, thread_ts=click.container.thread_ts, text=text
        ),
        f"answer a click in {click.channel_id}",
    )
