"""`/rubric admin` on screen, as pure functions: the settings in force and where each comes from, the
form that changes them, reading a submitted form back, and the words announcing a change.

Each setting's input has the setting's name as its block_id, so an error about a setting is shown
under its own input.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from slack_sdk.models.blocks import (
    Block,
    InputBlock,
    NumberInputElement,
    Option,
    StaticMultiSelectElement,
    StaticSelectElement,
    UserMultiSelectElement,
)
from slack_sdk.models.views import View

from bot.slack.blocks import block_dicts, context_block, header_block, section_block
from bot.slack.messages import SlackMessage
from bot.slack.mrkdwn import slack_date, truncate
from bot.slack.payloads import SubmittedView, Text
from bot.workspaces.settings import (
    LIMITS,
    MAX_GRADER_SAMPLES,
    MODEL_SETTINGS,
    AdminChoices,
    Deployment,
    EffectiveSettings,
    LimitName,
    ModelName,
    Resolved,
    SettingName,
)

ADMIN_CALLBACK_ID = "workspace_settings"
"""callback_id of the `/rubric admin` form; its private_metadata is an `AdminFormMetadata` as JSON."""

VALUE_ACTION_ID = "value"
"""action_id of each setting's input (its block_id is the setting's name)."""

EDITOR_GROUPS_BLOCK_ID = "rubric_editor_groups"
"""block_id of the user-group half of the editors (the people are the `rubric_editors` input)."""

DEPLOYMENT_DEFAULT = "deployment"
"""The value of the model menus' first option: use the deployment's model."""

OPTION_TEXT_MAX = Option.label_max_length
"""Longest text of a menu option Slack accepts."""

MAX_GROUP_OPTIONS = 100
"""Most options a Slack menu holds: a workspace with more user groups lists the first ones (and
those already chosen)."""

LABELS: dict[SettingName, str] = {
    "worker_model": "Worker model",
    "grader_model": "Grader model",
    "daily_requests_per_user": "Requests per person per day",
    "daily_tokens_per_channel": "Model tokens per channel per day",
    "daily_tokens_per_workspace": "Model tokens per workspace per day",
    "rubric_editors": "Rubric editors",
    "grader_samples": "Grader samples per iteration",
}
"""How the form and the summaries name each setting."""

MODEL_ROLES: dict[ModelName, str] = {
    "worker_model": "Answers the requests.",
    "grader_model": "Grades each answer against the rubric.",
}
"""What each model does, in the form's hints."""

LIMIT_HINTS: dict[LimitName, str] = {
    "daily_requests_per_user": "Requests one person may make per UTC day.",
    "daily_tokens_per_channel": "Worker and grader tokens one channel's requests may use per UTC day.",
    "daily_tokens_per_workspace": (
        "Worker and grader tokens all of this workspace's requests and replays may use per UTC day."
    ),
}
"""What each limit bounds, in the form's hints."""

SOURCE_WORDS = {"workspace": "set for this workspace", "deployment": "deployment default"}
"""Where a setting comes from, as the summaries say it."""


@dataclass(frozen=True)
class UserGroup:
    """A user group the editors' menu offers."""

    id: str
    name: str


class AdminFormMetadata(BaseModel):
    """The form's private_metadata: the channel `/rubric admin` was run in (where the confirmation goes)."""

    model_config = ConfigDict(frozen=True, strict=True)

    channel: Text


def admin_refusal() -> str:
    """What someone who is not a workspace admin or owner is told."""
    return (
        "Only the workspace's admins and owners may change its settings (models, daily limits, rubric "
        "editors), so nothing was changed. `/rubric usage` shows this channel's limits."
    )


def value_words(name: SettingName, value: object) -> str:
    """A setting's value in words (a limit of 0 is no limit; no editors: anyone)."""
    if name in LIMITS:
        return "no limit" if value == 0 else f"{value:,}"
    if name == "rubric_editors":
        assert isinstance(value, tuple)
        named = [f"<!subteam^{i}>" if i.startswith("S") else f"<@{i}>" for i in value]
        return ", ".join(named) if named else "anyone in the channel"
    if name == "grader_samples":
        return f"{value}"
    return f"`{value}`"


def _line(name: SettingName, setting: Resolved[Any]) -> str:
    why = f" ({setting.set_aside})" if setting.set_aside else ""
    return f"*{LABELS[name]}:* {value_words(name, setting.value)} — {SOURCE_WORDS[setting.source]}{why}"


def settings_lines(effective: EffectiveSettings) -> list[str]:
    """One line per setting: its value in force and where it comes from."""
    return [_line(name, getattr(effective, name)) for name in LABELS]


def settings_message(effective: EffectiveSettings, deployment: Deployment) -> SlackMessage:
    """`/rubric admin`'s answer: the settings in force, their sources, and who changed them last."""
    stored = effective.stored
    last = (
        f"Last changed by <@{stored.updated_by}> on {slack_date(stored.updated_at)}."
        if stored
        else "Nobody has changed them: every value is the deployment's."
    )
    note = (
        f"{last} Limits can't go above the deployment's; models are chosen among those it allows: "
        f"{', '.join(f'`{m}`' for m in deployment.allowed_models)}."
    )
    return {
        "text": "This workspace's settings: " + "; ".join(settings_lines(effective)).replace("*", ""),
        "blocks": block_dicts(
            [
                header_block("This workspace's settings"),
                section_block("\n".join(settings_lines(effective))),
                context_block(note),
            ]
        ),
    }


def changed_settings(before: EffectiveSettings, after: EffectiveSettings) -> list[str]:
    """What a save changed, one phrase per setting whose value or source changed."""
    changes = []
    for name in LABELS:
        old, new = getattr(before, name), getattr(after, name)
        if (old.value, old.source) != (new.value, new.source):
            changes.append(
                f"{LABELS[name].lower()}: {value_words(name, old.value)} → {value_words(name, new.value)} "
                f"({SOURCE_WORDS[new.source]})"
            )
    return changes


def saved_message(
    changes: Sequence[str], after: EffectiveSettings, deployment: Deployment, held: str | None = None
) -> SlackMessage:
    """The confirmation to the admin who saved: what changed (from the next request on), what was
    `held` for a replay, and the settings."""
    summary = settings_message(after, deployment)
    if not changes:
        head = "Nothing changed: the form held this workspace's settings as they were."
    else:
        head = "Saved. From the next request on: " + "; ".join(changes) + "."
    if held is not None:
        head += f" The new grader model is not in force yet: {held}"
    blocks = [section_block(head).to_dict(), *summary["blocks"]]
    return {"text": f"{head} {summary['text']}", "blocks": blocks}


def saved_modal(message: SlackMessage) -> dict[str, Any]:
    """What the form turns into once saved: the confirmation, with only a Close button."""
    view = View(type="modal", title="Workspace settings", close="Close", blocks=message.get("blocks", []))
    return view.to_dict()


def settings_modal(
    effective: EffectiveSettings, deployment: Deployment, *, channel: str, user_groups: Sequence[UserGroup]
) -> dict[str, Any]:
    """The form changing the workspace's settings, pre-set to what its admins set (empty: the
    deployment's, named in each hint)."""
    stored = effective.stored
    blocks: list[Block] = [
        section_block(
            "Set this workspace's own models, daily limits, rubric editors and grader samples. An empty "
            "field (or *Deployment default*) uses the deployment's value, which the operator sets."
        )
    ]
    for name in MODEL_SETTINGS:
        blocks.append(_model_input(name, deployment, getattr(stored, name) if stored else None))
    for limit in LIMITS:
        blocks.append(_limit_input(limit, deployment, getattr(stored, limit) if stored else None))
    chosen = stored.rubric_editors if stored and stored.rubric_editors is not None else ()
    blocks += _editor_inputs(deployment, chosen, user_groups)
    blocks.append(_samples_input(deployment, stored.grader_samples if stored else None))
    view = View(
        type="modal",
        callback_id=ADMIN_CALLBACK_ID,
        title="Workspace settings",
        submit="Save",
        close="Cancel",
        private_metadata=AdminFormMetadata(channel=channel).model_dump_json(),
        blocks=blocks,
    )
    return view.to_dict()


def _option(text: str, value: str) -> Option:
    return Option(text=truncate(text, OPTION_TEXT_MAX), value=value)


def _model_input(name: ModelName, deployment: Deployment, chosen: str | None) -> InputBlock:
    default = getattr(deployment, name)
    options = [_option(f"Deployment default: {default}", DEPLOYMENT_DEFAULT)]
    options += [_option(model, model) for model in deployment.allowed_models]
    initial = next((o for o in options if chosen is not None and o.value == chosen), options[0])
    return InputBlock(
        block_id=name,
        label=LABELS[name],
        hint=f"{MODEL_ROLES[name]} The choices are the models the operator allows.",
        element=StaticSelectElement(action_id=VALUE_ACTION_ID, options=options, initial_option=initial),
    )


def _limit_input(name: LimitName, deployment: Deployment, chosen: int | None) -> InputBlock:
    ceiling = deployment.ceiling(name)
    if ceiling:
        bound = f"Empty: the deployment's {ceiling:,}, which is also the most this workspace may set."
    else:
        bound = "Empty: the deployment's, no limit. 0: no limit."
    what = LIMIT_HINTS[name]
    return InputBlock(
        block_id=name,
        label=LABELS[name],
        hint=f"{what} {bound}",
        optional=True,
        element=NumberInputElement(
            action_id=VALUE_ACTION_ID,
            is_decimal_allowed=False,
            initial_value=str(chosen) if chosen is not None else None,
        ),
    )


def _samples_input(deployment: Deployment, chosen: int | None) -> InputBlock:
    return InputBlock(
        block_id="grader_samples",
        label=LABELS["grader_samples"],
        hint=(
            "Times the grader is asked each iteration, at once. Each verdict is then the majority, with "
            "its confidence (the share of samples that gave it); an even split is left to a person. "
            f"Each sample is a grader call. 1 to {MAX_GRADER_SAMPLES}; "
            f"empty: the deployment's, {deployment.grader_samples}."
        ),
        optional=True,
        element=NumberInputElement(
            action_id=VALUE_ACTION_ID,
            is_decimal_allowed=False,
            min_value="1",
            max_value=str(MAX_GRADER_SAMPLES),
            initial_value=str(chosen) if chosen is not None else None,
        ),
    )


def _editor_inputs(
    deployment: Deployment, chosen: Sequence[str], user_groups: Sequence[UserGroup]
) -> list[Block]:
    default = value_words("rubric_editors", deployment.rubric_editors)
    people = [i for i in chosen if not i.startswith("S")]
    blocks: list[Block] = [
        InputBlock(
            block_id="rubric_editors",
            label=LABELS["rubric_editors"],
            hint=(
                "Who may change how channels are graded, besides the workspace's admins and owners. "
                f"Empty (with no user group): the deployment's, {default}."
            ),
            optional=True,
            element=UserMultiSelectElement(action_id=VALUE_ACTION_ID, initial_users=people or None),
        )
    ]
    known = {group.id: group for group in user_groups[:MAX_GROUP_OPTIONS]}
    groups = [i for i in chosen if i.startswith("S")]
    options = [_option(f"@{g.name}", g.id) for g in known.values()]
    options += [_option(group, group) for group in groups if group not in known]
    if options:
        initial = [o for o in options if o.value in groups]
        blocks.append(
            InputBlock(
                block_id=EDITOR_GROUPS_BLOCK_ID,
                label="Rubric editor user groups",
                hint="Members of these user groups may change how channels are graded too.",
                optional=True,
                element=StaticMultiSelectElement(
                    action_id=VALUE_ACTION_ID, options=options, initial_options=initial or None
                ),
            )
        )
    return blocks


def admin_choices(view: SubmittedView) -> AdminChoices:
    """What a submitted form asks for."""

    def model(name: ModelName) -> str | None:
        option = view.input(name, VALUE_ACTION_ID).selected_option
        return None if option is None or option.value == DEPLOYMENT_DEFAULT else option.value

    groups = view.input(EDITOR_GROUPS_BLOCK_ID, VALUE_ACTION_ID).selected_options or []
    return AdminChoices(
        worker_model=model("worker_model"),
        grader_model=model("grader_model"),
        daily_requests_per_user=view.input("daily_requests_per_user", VALUE_ACTION_ID).value or "",
        daily_tokens_per_channel=view.input("daily_tokens_per_channel", VALUE_ACTION_ID).value or "",
        daily_tokens_per_workspace=view.input("daily_tokens_per_workspace", VALUE_ACTION_ID).value or "",
        rubric_editors=[
            *(view.input("rubric_editors", VALUE_ACTION_ID).selected_users or []),
            *(option.value for option in groups),
        ],
        grader_samples=view.input("grader_samples", VALUE_ACTION_ID).value or "",
    )


def form_channel(view: SubmittedView) -> str | None:
    """The channel the form was opened from; None if its metadata does not say."""
    try:
        return AdminFormMetadata.model_validate_json(view.private_metadata).channel
    except ValidationError:
        return None


def user_groups_of(listed: Sequence[dict[str, Any]]) -> list[UserGroup]:
    """The enabled user groups of a ``usergroups.list`` answer's ``usergroups``, by name."""
    groups = [
        UserGroup(str(g["id"]), str(g.get("handle") or g.get("name") or g["id"]))
        for g in listed
        if g.get("id") and not g.get("date_delete")
    ]
    return sorted(groups, key=lambda group: group.name.lower())
