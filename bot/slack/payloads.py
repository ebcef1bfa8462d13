"""The parts of Slack's interactivity payloads the bot relies on, as pydantic models.

Button clicks and modal submissions are read through these models, so a payload without a part
the bot needs (or with one of the wrong type) fails validation with a message naming the part,
instead of a KeyError in a listener. Only the parts the bot reads are modelled; Slack's many
other fields are ignored.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "ITERATION_MAX",
    "Click",
    "InputState",
    "Iteration",
    "RubricEditorMetadata",
    "Submission",
    "SubmittedView",
    "Text",
    "problems",
]

ITERATION_MAX = 2**31 - 1
"""Largest iteration number a button or form may name: the range of PostgreSQL's INTEGER, the
narrowest column an iteration is stored in. Anything larger names no iteration the bot has."""

Text = Annotated[str, Field(min_length=1)]
"""A non-empty string: an empty id or timestamp could never match anything stored."""

Iteration = Annotated[int, Field(ge=0, le=ITERATION_MAX)]
"""A grader iteration's number (0 is the first) as buttons and forms carry it."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class Ref(_Part):
    """A user or channel as a payload names it: an object with an ``id``."""

    id: Text


class Container(_Part):
    """Where a clicked message is."""

    channel_id: Text | None = None
    thread_ts: Text | None = None


class Action(_Part):
    """One clicked button; the review buttons carry their iteration in ``value``."""

    value: str = ""


class Click(_Part):
    """A ``block_actions`` payload: a button click on one of the bot's messages."""

    user: Ref
    trigger_id: Text | None = None
    channel: Ref | None = None
    container: Container = Container()
    actions: Annotated[list[Action], Field(min_length=1)]

    @property
    def channel_id(self) -> str | None:
        """The channel of the clicked message, where a reply to the clicker goes."""
        return self.channel.id if self.channel else self.container.channel_id

    @property
    def value(self) -> str:
        """The clicked button's value."""
        return self.actions[0].value


class SelectedOption(_Part):
    value: str


class InputState(_Part):
    """One input's state in a submitted view: a text or number input's value, a menu's choice, a
    multi-select's choices or the people chosen in a user menu."""

    value: str | None = None
    selected_option: SelectedOption | None = None
    selected_options: list[SelectedOption] | None = None
    selected_users: list[str] | None = None


class ViewState(_Part):
    """Every input's state, by block_id and then action_id."""

    values: dict[str, dict[str, InputState]] = {}


class SubmittedView(_Part):
    """A modal as Slack sends it back on submit."""

    callback_id: str = ""
    private_metadata: str = ""
    state: ViewState = ViewState()

    def input(self, block_id: str, action_id: str) -> InputState:
        """One input's state; empty when Slack left it out (it does for untouched optional inputs)."""
        return self.state.values.get(block_id, {}).get(action_id) or InputState()


class RubricEditorMetadata(_Part):
    """The channel-rubric editor's private_metadata (see :func:`bot.rendering.rubrics.rubric_modal`)."""

    model_config = ConfigDict(strict=True)

    channel: Text


class Submission(_Part):
    """A ``view_submission`` payload: who submitted which modal."""

    user: Ref
    view: SubmittedView


def problems(error: ValidationError) -> str:
    """A validation error in a few words per problem, e.g. ``user: Field required``."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'value'}: {e['msg']}" for e in error.errors())
