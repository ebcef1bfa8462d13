"""A local stand-in for the Slack Web API that records every call.

Point a slack_sdk client at ``SlackApiStandin.api_url`` (the bot reads it from ``SLACK_API_URL``).
Every method is accepted and recorded; the methods the bot relies on get realistic answers, including
Slack's own validation of Block Kit size limits, so a message real Slack would reject fails here too.
Tests can make the next calls of a method fail (HTTP errors such as 429, or ``ok: false`` errors).

It can also stand in for several workspaces that install the app with OAuth (`add_workspace`):
Slack's authorize page (``/oauth/v2/authorize``) sends the installer back to the app with a code,
``oauth.v2.access`` trades it for the workspace's own bot token (and refreshes rotating ones), and
every call is recorded with the workspace whose token it used (`SlackCall.team`).

Threads and files people shared: tests seed a thread's earlier messages (`add_thread_messages`, served
by ``conversations.replies`` page by page), people's profiles (`add_user`, for ``users.info``) and
files (`add_file`, downloaded from ``url_private_download`` only with the bot token, or refused with
403 like a file the bot may not see).

Modals open as on Slack: ``views.open`` and ``views.push`` exchange a trigger id the payload builders
handed out (tests.standins.triggers) once, within its expiry, and refuse any other.

Socket Mode is served too: ``apps.connections.open`` hands out a ``ws://`` URL on this server (real
Slack's is ``wss://``), the websocket greets the client with ``hello``, and the test pushes envelopes
with `send_envelope` and reads the client's acks with `wait_for_ack`.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import re
import threading
import time
import uuid
from collections import defaultdict, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Literal
from urllib.parse import urlencode

from aiohttp import WSMsgType, web

from tests.standins import HOST, BackgroundServer, wait_for
from tests.standins.triggers import HANDED_OUT, TRIGGER_EXPIRY_SECONDS, TriggerIds

Args = dict[str, Any]
Answer = dict[str, Any]
EnvelopeType = Literal["events_api", "slash_commands", "interactive"]

BOT_USER_ID = "UBOT"
"""The bot's user id as auth.test reports it; events that mention the bot use ``<@UBOT>``."""
BOT_ID = "BBOT"
"""The bot's bot id as auth.test reports it (messages the bot posts carry it)."""
TEAM_ID = "T1"
"""The workspace id the stand-in pretends to be."""
BOT_NAME = "rubric-bot"
"""The bot user's name as auth.test reports it."""

FIRST_TS_SECONDS = 1_700_000_000
"""Message timestamps start here, so they look like real Slack ``ts`` values (seconds.micros)."""
TS_STEP_MICROS = 100
"""Each new message ts is this many microseconds after the previous one: unique and increasing."""

MAX_BLOCKS = 50
"""Slack rejects a message with more blocks than this (``invalid_blocks``)."""
MAX_VIEW_BLOCKS = 100
"""Slack rejects a modal or Home tab with more blocks than this."""
MAX_MODAL_TITLE_CHARS = 24
"""Slack rejects a modal whose title (or submit or close button) is longer than this."""
MAX_TEXT_CHARS = 40_000
"""Slack rejects message ``text`` longer than this (``msg_too_long``)."""
BLOCK_TEXT_LIMITS = {"section": 3_000, "header": 150}
"""Longest ``text.text`` Slack accepts per block type."""
MARKDOWN_TEXT_LIMIT = 12_000
"""Longest ``text`` of a ``markdown`` block (standard Markdown, a plain string)."""
MAX_BLOCKS_TEXT_CHARS = 13_000
"""Slack refuses a message whose blocks hold more text than about this (``msg_blocks_too_long``)."""
MAX_SECTION_FIELDS = 10
"""Most ``fields`` a section block may have."""
MAX_FIELD_CHARS = 2_000
"""Longest text of one section field."""
MAX_CONTEXT_ELEMENTS = 10
"""Most elements a context block may have."""
MAX_BUTTON_VALUE_CHARS = 2_000
"""Longest ``value`` of a button element."""

JSON_FORM_FIELDS = frozenset({"blocks", "attachments", "files", "metadata", "view", "prompts", "chunks"})
"""Arguments slack_sdk sends as JSON strings when it form-encodes a call; decoded so tests see structure."""

TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
"""The statuses a streamed plan's task may have (``task_update`` chunks)."""

SESSION_STATUSES = frozenset({"processing", "active", "suspended", "closed"})
"""The statuses ``agents.sessions.setStatus`` takes; any other is refused (``invalid_status``)."""
MAX_SESSION_TITLE_CHARS = 200
"""Longest agent session title Slack takes (``agents.sessions.setStatus`` and ``rename``)."""

CONTEXT_ACTIONS_ELEMENTS = frozenset({"feedback_buttons", "icon_button"})
"""The elements a ``context_actions`` block may hold (at most `MAX_CONTEXT_ACTIONS`)."""
MAX_CONTEXT_ACTIONS = 5
"""Most elements a ``context_actions`` block may have."""
MAX_FEEDBACK_TEXT_CHARS = 75
"""Longest text of a feedback button (``feedback_buttons``' positive and negative buttons)."""

UNFURL_METHODS = frozenset({"chat.postMessage", "chat.scheduleMessage"})
"""The methods that take ``unfurl_links`` and ``unfurl_media``: a post without both false previews
its links (Slack unfurls media by default), see `SlackApiStandin.unfurling_posts`."""

MAX_UPLOAD_BYTES = 50 * 1024 * 1024
"""Largest request body accepted (file uploads); aiohttp's 1 MiB default is too small for files."""

KNOWN_METHODS = frozenset(
    {
        "agents.sessions.rename",
        "agents.sessions.setStatus",
        "apps.connections.open",
        "assistant.threads.setStatus",
        "assistant.threads.setSuggestedPrompts",
        "assistant.threads.setTitle",
        "auth.revoke",
        "auth.test",
        "chat.appendStream",
        "chat.delete",
        "chat.postEphemeral",
        "chat.postMessage",
        "chat.startStream",
        "chat.stopStream",
        "chat.update",
        "conversations.history",
        "conversations.list",
        "conversations.replies",
        "files.completeUploadExternal",
        "files.delete",
        "files.getUploadURLExternal",
        "oauth.v2.access",
        "reactions.add",
        "reactions.remove",
        "usergroups.list",
        "usergroups.users.list",
        "users.conversations",
        "users.info",
        "views.open",
        "views.publish",
        "views.push",
        "views.update",
    }
)
"""Every Web API method the stand-in serves (each named Slack method; one without an answer of its
own gets a plain ``ok``). Any other name is answered ``unknown_method``, as Slack answers it: a
misspelt or invented method fails in the tests as it would in Slack."""
APP_TOKEN_METHODS = frozenset({"apps.connections.open"})
"""Methods Slack accepts only with the app-level (``xapp-``) token; every other one takes the bot token."""
FILES_PATH = "/files-pri/"
"""Where shared files are downloaded from, like Slack's ``https://files.slack.com/files-pri/…``."""
DOWNLOAD_METHOD = "files.download"
"""The method name under which file downloads are recorded as calls."""
REPLIES_PAGE_DEFAULT = 1000
"""Messages per ``conversations.replies`` page when the caller gives no ``limit`` (Slack's default)."""
SOCKET_PATH = "/link/"
"""Where Socket Mode clients connect, with ``?ticket=``, as in Slack's ``wss://…slack.com/link/`` URLs."""
SOCKET_HELLO = {
    "type": "hello",
    "num_connections": 1,
    "debug_info": {"host": "standin", "approximate_connection_time": 3600},
}
"""The first frame Slack sends on a new Socket Mode connection."""
SOCKET_REFUSED_STATUS = 503
"""How the websocket endpoint answers while `refuse_sockets` is on: Slack's edge when it is down."""
AUTHORIZE_PATH = "/oauth/v2/authorize"
"""Slack's authorize page, beside the Web API as on slack.com (``/api/`` and ``/oauth/v2/authorize``)."""
OAUTH_METHODS = frozenset({"oauth.v2.access"})
"""Methods called with the app's client id and secret (HTTP Basic) rather than a token."""
_TS = re.compile(r"\d+\.\d+")
"""What a message ts looks like (seconds.micros)."""

ROTATING_EXPIRES_IN = 60
"""Seconds a rotating bot token is said to live: well inside any refresh margin, so the app
refreshes it before each use."""
SOCKET_SEND_TIMEOUT = 5.0
"""Seconds pushing one envelope may take; the client is on loopback, so only a dead server is slower."""


class SlackError(Exception):
    """An ``ok: false`` answer with Slack's error code."""

    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.extra = extra


@dataclass(frozen=True)
class SlackCall:
    """One recorded Web API request and the stand-in's answer to it."""

    method: str
    args: Args
    headers: dict[str, str]  # the request's headers, Authorization removed
    http_method: str
    status: int
    response: Answer
    received_at: float = field(default_factory=time.perf_counter)  # perf_counter() on arrival
    team: str | None = None
    """The workspace whose bot token the call carried (with `add_workspace`), else None."""
    token: str | None = None
    """The bot token the call carried (with `add_workspace`): which of its workspace's tokens."""

    @property
    def ok(self) -> bool:
        return self.status == 200 and self.response.get("ok") is True


@dataclass
class StandinWorkspace:
    """A workspace the app can be installed into with OAuth (`SlackApiStandin.add_workspace`).

    An org-wide installation (`org_wide`) is the Enterprise Grid org's: one token for all its teams.
    """

    team: str
    enterprise: str | None = None
    org_wide: bool = False
    rotating: bool = False
    """Whether its tokens rotate: each is handed out expiring soon, to be refreshed with
    ``oauth.v2.access`` (earlier ones keep working until they would expire, as on Slack)."""
    tokens: list[str] = field(default_factory=list)
    """Every bot token issued to it, oldest first."""
    refresh_token: str | None = None
    uninstalled: bool = False
    """Whether the app was removed: none of its tokens works any more."""

    @property
    def bot_user_id(self) -> str:
        """The bot's user id in this workspace (each installation has a bot user of its own)."""
        return f"U{self.team}BOT"

    @property
    def token(self) -> str | None:
        """The newest bot token, if installed."""
        return self.tokens[-1] if self.tokens else None


@dataclass
class SlackMessage:
    """A message as it currently stands in the stand-in's channel (chat.update edits applied)."""

    channel: str
    ts: str
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]]
    metadata: dict[str, Any] | None
    edits: int = 0
    team: str | None = None
    """The workspace whose token posted it (with `add_workspace`), else None."""
    streaming: bool = False
    """Whether it is a stream (``chat.startStream``) not stopped yet: only then does Slack take
    ``chat.appendStream`` and ``chat.stopStream`` on it."""
    streamed: bool = False
    """Whether it was started as a stream."""
    plan_title: str | None = None
    """The title of its plan (``plan_update`` chunks), if streamed with one."""
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Its plan's tasks as they stand, by id (``task_update`` chunks, later ones replacing earlier)."""
    task_updates: list[dict[str, Any]] = field(default_factory=list)
    """Every ``task_update`` chunk it was sent, in order."""

    @property
    def event_type(self) -> str | None:
        """The message metadata's ``event_type`` (how the bot tags evaluation and final messages)."""
        return (self.metadata or {}).get("event_type")

    @property
    def all_text(self) -> str:
        """The fallback text plus every text inside the blocks, one per line, for assertions."""
        return "\n".join([self.text, *block_texts(self.blocks)])

    def feedback_buttons(self) -> dict[str, Any] | None:
        """Its ``feedback_buttons`` element (in a ``context_actions`` block), if it has one."""
        return next(
            (
                element
                for block in self.blocks
                if block.get("type") == "context_actions"
                for element in block.get("elements") or []
                if element.get("type") == "feedback_buttons"
            ),
            None,
        )

    def task_titles(self) -> list[str]:
        """Its plan's task titles, in the order the tasks were first sent."""
        return [task["title"] for task in self.tasks.values()]


@dataclass
class Upload:
    """A file announced with files.getUploadURLExternal, its uploaded bytes and its completion."""

    file_id: str
    filename: str
    length: int
    data: bytes | None = None
    title: str | None = None
    channel: str | None = None
    thread_ts: str | None = None
    completed: bool = False
    deleted: bool = False
    """Deleted with files.delete: Slack no longer shows it anywhere."""


@dataclass(frozen=True)
class SharedFile:
    """A file people shared, served at its download URL."""

    file_id: str
    name: str
    data: bytes
    mimetype: str
    forbidden: bool


@dataclass(frozen=True)
class SocketConnection:
    """A Socket Mode websocket a client opened with a ticket from ``apps.connections.open``."""

    ticket: str
    open: bool


@dataclass(frozen=True)
class SocketAck:
    """A client's acknowledgement of one envelope, with the response payload it carried, if any."""

    envelope_id: str
    payload: dict[str, Any] | None
    received_at: float = field(default_factory=time.perf_counter)  # perf_counter() on arrival


@dataclass
class AgentSession:
    """An agent session of one thread (``agents.sessions.setStatus``), as it stands."""

    status: str
    title: str | None
    statuses: list[str] = field(default_factory=list)
    """Every status it was set to, in order (the current one last)."""


@dataclass(frozen=True)
class _Fault:
    status: int
    error: str
    retry_after: int | None = None


@dataclass
class _State:
    """Everything the stand-in remembers; only touched while holding the stand-in's lock."""

    calls: list[SlackCall] = field(default_factory=list)
    messages: dict[tuple[str, str], SlackMessage] = field(default_factory=dict)
    reactions: defaultdict[tuple[str, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    statuses: dict[tuple[str, str], str] = field(default_factory=dict)  # thread status by thread
    members: defaultdict[str, set[str]] = field(default_factory=lambda: defaultdict(set))  # by channel
    homes: dict[str, dict[str, Any]] = field(default_factory=dict)  # published Home tab by user
    uploads: dict[str, Upload] = field(default_factory=dict)
    shared_files: dict[str, SharedFile] = field(default_factory=dict)
    thread_messages: defaultdict[tuple[str, str], list[dict[str, Any]]] = field(
        default_factory=lambda: defaultdict(list)
    )  # people's messages by (channel, thread_ts)
    users: dict[str, dict[str, Any]] = field(default_factory=dict)  # users.info's user by id
    faults: defaultdict[str, deque[_Fault]] = field(default_factory=lambda: defaultdict(deque))
    counter: int = 0
    tickets: set[str] = field(default_factory=set)  # issued by apps.connections.open
    connections: list[str] = field(default_factory=list)  # tickets of websockets opened, in order
    live: dict[str, web.WebSocketResponse] = field(default_factory=dict)  # open websockets by ticket
    outage: int | None = None  # while set, every Web API call is answered with this HTTP status
    refusing_sockets: bool = False  # answer websocket handshakes with SOCKET_REFUSED_STATUS
    acks: dict[str, SocketAck] = field(default_factory=dict)
    workspaces: dict[str, StandinWorkspace] = field(default_factory=dict)  # by team
    codes: dict[str, str] = field(default_factory=dict)  # team by unused OAuth code
    caller: StandinWorkspace | None = None  # whose token the call being answered carries
    titles: dict[tuple[str, str], str] = field(default_factory=dict)  # assistant thread title by thread
    prompts: dict[tuple[str, str], list[dict[str, Any]]] = field(
        default_factory=dict
    )  # suggested prompts by assistant thread
    sessions: dict[tuple[str, str], AgentSession] = field(default_factory=dict)  # by (channel, thread)


class SlackApiStandin(BackgroundServer):
    """Slack Web API on 127.0.0.1: ``POST|GET /api/{method}``, the external file upload URL and the
    Socket Mode websocket.

    With `token` set, calls whose bearer token differs are refused like Slack does (``invalid_auth``);
    `app_token` does the same for ``apps.connections.open``. Either token used where the other
    belongs gets ``not_allowed_token_type``.

    ``views.open`` and ``views.push`` exchange a trigger id of `triggers` (by default the payload
    builders' ledger) handed out at most `trigger_expiry` seconds before, on that ledger's clock, once.
    """

    def __init__(
        self,
        token: str | None = None,
        app_token: str | None = None,
        *,
        triggers: TriggerIds = HANDED_OUT,
        trigger_expiry: float = TRIGGER_EXPIRY_SECONDS,
    ) -> None:
        super().__init__()
        self.token = token
        self.app_token = app_token
        self.triggers = triggers
        self.trigger_expiry = trigger_expiry
        self.channel_names: dict[str, str] = {}
        """Channels ``conversations.list`` lists, name by id; tests set them."""
        self.user_groups: dict[str, list[str]] = {}
        """Members of each user group, by group id, as ``usergroups.users.list`` lists them (and
        ``usergroups.list`` the groups)."""
        self.client_id = "standin-client-id"
        """The app's client id; ``oauth.v2.access`` refuses other credentials (``invalid_client_id``)."""
        self.client_secret = "standin-client-secret"
        """The app's client secret (``bad_client_secret`` otherwise)."""
        self._lock = threading.Lock()
        self._state = _State()
        self._answers: dict[str, Callable[[Args], Answer]] = {
            "auth.test": self._auth_test,
            "auth.revoke": self._auth_revoke,
            "chat.postMessage": self._post_message,
            "chat.postEphemeral": self._post_ephemeral,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "reactions.add": self._add_reaction,
            "reactions.remove": self._remove_reaction,
            "assistant.threads.setStatus": self._set_status,
            "assistant.threads.setTitle": self._set_title,
            "assistant.threads.setSuggestedPrompts": self._set_prompts,
            "agents.sessions.setStatus": self._set_session_status,
            "agents.sessions.rename": self._rename_session,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
            "views.open": self._open_view,
            "views.push": self._open_view,  # a view pushed onto an open modal takes a trigger id too
            "views.update": self._update_view,
            "views.publish": self._publish_view,
            "users.conversations": self._users_conversations,
            "usergroups.users.list": self._user_group_members,
            "usergroups.list": self._list_user_groups,
            "conversations.list": self._list_conversations,
            "conversations.history": self._no_messages,
            "conversations.replies": self._replies,
            "users.info": self._user_info,
            "files.getUploadURLExternal": self._get_upload_url,
            "files.completeUploadExternal": self._complete_upload,
            "files.delete": self._delete_file,
            "apps.connections.open": self._open_connection,
            "oauth.v2.access": self._oauth_access,
        }

    @property
    def api_url(self) -> str:
        """The Web API base URL for slack_sdk (``base_url``) and the bot's ``SLACK_API_URL``."""
        return f"{self.url}/api/"

    def build_app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_UPLOAD_BYTES)
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/upload/{file_id}", self._handle_upload)
        app.router.add_get(FILES_PATH + "{file_id}/{tail:.*}", self._handle_download)
        app.router.add_post("/respond/{name}", self._handle_response_url)
        app.router.add_get(SOCKET_PATH, self._handle_socket)
        app.router.add_get(AUTHORIZE_PATH, self._handle_authorize)
        app.on_shutdown.append(self._close_sockets)
        return app

    def response_url(self, name: str = "1") -> str:
        """A ``response_url`` for slash command and interaction payloads; posts to it are recorded
        as calls of method ``"response_url"`` with the JSON body as args (and ``name`` added)."""
        return f"{self.url}/respond/{name}"

    # ----- what people shared (safe from any thread) -----

    def add_thread_messages(self, channel: str, thread_ts: str, *messages: dict[str, Any]) -> None:
        """Put people's messages (``{"user", "text", "ts"}``, …) in a thread, for ``conversations.replies``
        (which also lists the bot's own messages there)."""
        with self._lock:
            self._state.thread_messages[(channel, thread_ts)].extend(copy.deepcopy(list(messages)))

    def add_user(self, user: str, display_name: str, *, admin: bool = False, owner: bool = False) -> None:
        """A person ``users.info`` knows (any other id is ``user_not_found``); a workspace `admin`
        or `owner` has Slack's ``is_admin`` / ``is_owner`` set (an owner is an admin too)."""
        with self._lock:
            self._state.users[user] = {
                "id": user,
                "name": display_name.lower(),
                "profile": {"display_name": display_name, "real_name": f"{display_name} Example"},
                "is_admin": admin or owner,
                "is_owner": owner,
                "is_primary_owner": False,
            }

    def add_file(
        self, name: str, data: bytes, mimetype: str, *, filetype: str = "", forbidden: bool = False
    ) -> dict[str, Any]:
        """Serve a shared file; its Slack file object, as a message event's ``files`` carries it.
        A `forbidden` one answers its download with 403, as Slack does for a file the bot may not see."""
        with self._lock:
            file_id = f"F{self._next_ts().replace('.', '')}"
            self._state.shared_files[file_id] = SharedFile(file_id, name, data, mimetype, forbidden)
        return {
            "id": file_id,
            "name": name,
            "title": name,
            "mimetype": mimetype,
            "filetype": filetype or name.rpartition(".")[2],
            "size": len(data),
            "mode": "hosted",
            "url_private": f"{self.url}{FILES_PATH}{file_id}/{name}",
            "url_private_download": f"{self.url}{FILES_PATH}{file_id}/download/{name}",
        }

    # ----- workspaces installing the app with OAuth -----

    def add_workspace(
        self, team: str, *, enterprise: str | None = None, org_wide: bool = False, rotating: bool = False
    ) -> StandinWorkspace:
        """A workspace the app can be installed into; from now on calls need one of their tokens.

        With `org_wide` it is the org-wide installation of Enterprise Grid org `enterprise`, whose
        token serves every team of the org (events carry each team's own id).
        """
        workspace = StandinWorkspace(team, enterprise, org_wide, rotating)
        with self._lock:
            self._state.workspaces[team] = workspace
        return workspace

    def uninstall(self, team: str) -> None:
        """The workspace removes the app: its tokens stop working (``token_revoked``)."""
        with self._lock:
            self._state.workspaces[team].uninstalled = True

    def workspace(self, team: str) -> StandinWorkspace:
        """The workspace as it stands (its tokens so far)."""
        with self._lock:
            return copy.deepcopy(self._state.workspaces[team])

    # ----- fault injection -----

    def fail_next(
        self, method: str, *, status: int = 429, retry_after: int | None = 1, times: int = 1
    ) -> None:
        """Answer the next `times` calls of `method` with HTTP `status` (429 carries Retry-After)."""
        error = "ratelimited" if status == 429 else "fatal_error"
        fault = _Fault(status, error, retry_after if status == 429 else None)
        with self._lock:
            self._state.faults[method].extend([fault] * times)

    def error_next(self, method: str, error: str = "channel_not_found", *, times: int = 1) -> None:
        """Answer the next `times` calls of `method` with HTTP 200 ``{"ok": false, "error": error}``."""
        with self._lock:
            self._state.faults[method].extend([_Fault(200, error)] * times)

    def begin_outage(self, status: int = 503) -> None:
        """Answer every Web API call with HTTP `status` until `end_outage`: Slack down, for as long
        as the test says."""
        with self._lock:
            self._state.outage = status

    def end_outage(self) -> None:
        """Answer Web API calls normally again."""
        with self._lock:
            self._state.outage = None

    # ----- Socket Mode (safe from any thread) -----

    def send_envelope(self, kind: EnvelopeType, payload: dict[str, Any], *, retry_attempt: int = 0) -> str:
        """Push `payload` in an envelope to the newest open Socket Mode connection; its envelope_id.

        Build `payload` with tests.standins.slack_requests (``event_callback``, ``slash_command``, …).
        An event Slack delivers again, because its first envelope was not acked, has a
        `retry_attempt` above 0 (Slack's reason: ``timeout``).
        """
        envelope_id = str(uuid.uuid4())
        envelope: dict[str, Any] = {
            "envelope_id": envelope_id,
            "type": kind,
            "payload": payload,
            # Events are acked empty; commands and interactions may answer in their ack.
            "accepts_response_payload": kind != "events_api",
        }
        if kind == "events_api":
            envelope |= {"retry_attempt": retry_attempt, "retry_reason": "timeout" if retry_attempt else ""}
        with self._lock:
            socket = next(reversed(self._state.live.values()), None)
        if socket is None or self._loop is None:
            raise RuntimeError("no Socket Mode client is connected")
        sent = asyncio.run_coroutine_threadsafe(socket.send_json(envelope), self._loop)
        sent.result(timeout=SOCKET_SEND_TIMEOUT)
        return envelope_id

    def ack_of(self, envelope_id: str) -> SocketAck | None:
        """The client's ack of envelope `envelope_id` so far, if any."""
        with self._lock:
            return self._state.acks.get(envelope_id)

    def wait_for_ack(self, envelope_id: str, timeout: float = 10.0) -> SocketAck:
        """The client's ack of envelope `envelope_id`, once it arrives (AssertionError after `timeout`)."""

        return wait_for(
            lambda: self.ack_of(envelope_id),
            timeout,
            message=f"the ack of Socket Mode envelope {envelope_id}",
        )

    def refuse_sockets(self, refuse: bool = True) -> None:
        """Refuse (or, with False, accept again) new websocket handshakes; `apps.connections.open`
        still answers, so a client gets its URL and then fails to connect, as in a Slack outage."""
        with self._lock:
            self._state.refusing_sockets = refuse

    def drop_sockets(self) -> None:
        """Close every open Socket Mode websocket from the server's side, as a network drop would."""
        if self._loop is None:
            raise RuntimeError("the stand-in is not running")
        closing = asyncio.run_coroutine_threadsafe(self._close_sockets(), self._loop)
        closing.result(timeout=SOCKET_SEND_TIMEOUT)

    def socket_connections(self) -> list[SocketConnection]:
        """Every Socket Mode websocket opened so far, oldest first, and whether it is still open."""
        with self._lock:
            return [SocketConnection(t, t in self._state.live) for t in self._state.connections]

    def socket_connected(self) -> bool:
        """Whether a Socket Mode client is connected now (a bot in Socket Mode is ready once it is)."""
        with self._lock:
            return bool(self._state.live)

    # ----- queries (safe from any thread; they return copies) -----

    def calls_by_team(self, team: str | None) -> list[SlackCall]:
        """Every recorded call made with `team`'s token (None: calls with no workspace's token)."""
        return [call for call in self.calls() if call.team == team]

    def calls(self, method: str | None = None) -> list[SlackCall]:
        """Every recorded call, oldest first, failed ones included; only `method`'s when given."""
        with self._lock:
            return [c for c in self._state.calls if method is None or c.method == method]

    def messages(self, channel: str | None = None) -> list[SlackMessage]:
        """Messages the bot posted and has not deleted, in posting order, edits applied."""
        with self._lock:
            found = [m for m in self._state.messages.values() if channel is None or m.channel == channel]
            return copy.deepcopy(found)

    def messages_in_thread(self, channel: str, thread_ts: str) -> list[SlackMessage]:
        """The bot's messages in one thread (its root too, if the bot posted it), edits applied."""
        return [m for m in self.messages(channel) if thread_ts in (m.thread_ts, m.ts)]

    def reactions(self, channel: str, ts: str) -> set[str]:
        """Names of the reactions the bot currently has on a message."""
        with self._lock:
            return set(self._state.reactions.get((channel, ts), set()))

    def join(self, channel: str, *users: str) -> None:
        """Make `users` (the bot is ``BOT_USER_ID``) members of `channel`, as users.conversations reports."""
        with self._lock:
            self._state.members[channel].update(users)

    def home(self, user: str) -> dict[str, Any] | None:
        """The Home tab view last published for `user`, or None."""
        with self._lock:
            return copy.deepcopy(self._state.homes.get(user))

    def thread_title(self, channel: str, thread_ts: str) -> str | None:
        """The assistant thread's title (``assistant.threads.setTitle``), if set."""
        with self._lock:
            return self._state.titles.get((channel, thread_ts))

    def suggested_prompts(self, channel: str, thread_ts: str) -> list[dict[str, Any]]:
        """The assistant thread's suggested prompts (``assistant.threads.setSuggestedPrompts``)."""
        with self._lock:
            return copy.deepcopy(self._state.prompts.get((channel, thread_ts), []))

    def session(self, channel: str, thread_ts: str) -> AgentSession | None:
        """The agent session of a thread (``agents.sessions.setStatus``), if one was made."""
        with self._lock:
            return copy.deepcopy(self._state.sessions.get((channel, thread_ts)))

    def unfurling_posts(self) -> list[SlackCall]:
        """Every post that asked Slack to preview its links or media: one not sent with both
        ``unfurl_links`` and ``unfurl_media`` false (Slack's default previews media)."""
        return [
            call
            for call in self.calls()
            if call.method in UNFURL_METHODS
            and not (_false(call.args.get("unfurl_links")) and _false(call.args.get("unfurl_media")))
        ]

    def end_streams(self) -> None:
        """End every open stream, as Slack does past its streaming window: from now on their
        ``chat.appendStream`` and ``chat.stopStream`` get ``message_not_in_streaming_state``."""
        with self._lock:
            for message in self._state.messages.values():
                message.streaming = False

    def thread_status(self, channel: str, thread_ts: str) -> str:
        """The bot's status shown in a thread now ('' when none): Slack clears it when the bot posts there."""
        with self._lock:
            return self._state.statuses.get((channel, thread_ts), "")

    def uploads(self) -> list[Upload]:
        """Files announced for upload, in order, with their bytes once uploaded."""
        with self._lock:
            return copy.deepcopy(list(self._state.uploads.values()))

    # ----- HTTP handlers -----

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        token = _bearer_token(request) or args.pop("token", None)
        if method in OAUTH_METHODS:
            args |= _basic_credentials(request)
        with self._lock:
            self._state.caller = self._token_owner(token)
            status, answer, headers = self._answer(method, args, token)
            self._state.calls.append(
                SlackCall(
                    method=method,
                    args=args,
                    headers={k: v for k, v in request.headers.items() if k.lower() != "authorization"},
                    http_method=request.method,
                    status=status,
                    response=answer,
                    team=self._state.caller.team if self._state.caller else None,
                    token=token if self._state.caller else None,
                )
            )
        return web.json_response(answer, status=status, headers=headers)

    async def _handle_authorize(self, request: web.Request) -> web.Response:
        """Slack's authorize page, after the installer approved: back to the app with a code.

        The workspace is the ``team`` the app's install link names (as a real installer picks it).
        """
        query = request.query
        team, redirect = query.get("team", ""), query.get("redirect_uri", "")
        with self._lock:
            known = team in self._state.workspaces
            if known:
                code = uuid.uuid4().hex
                self._state.codes[code] = team
        if query.get("client_id") != self.client_id or not known or not redirect:
            return web.Response(status=400, text="invalid authorize request")
        target = redirect + "?" + urlencode({"code": code, "state": query.get("state", "")})
        raise web.HTTPFound(target)

    async def _handle_upload(self, request: web.Request) -> web.Response:
        data = await request.read()
        with self._lock:
            upload = self._state.uploads.get(request.match_info["file_id"])
            if upload is None:
                return web.Response(status=404, text="unknown upload")
            upload.data = data
        return web.Response(text=f"OK - {len(data)}")

    async def _handle_download(self, request: web.Request) -> web.Response:
        file_id = request.match_info["file_id"]
        with self._lock:
            shared = self._state.shared_files.get(file_id)
            allowed = self.token is None or _bearer_token(request) == self.token
            status = 404 if shared is None else 403 if shared.forbidden or not allowed else 200
            self._state.calls.append(
                SlackCall(
                    DOWNLOAD_METHOD, {"file": file_id}, {}, request.method, status, {"ok": status == 200}
                )
            )
        if shared is None or status != 200:
            return web.Response(status=status, text="no such file" if shared is None else "forbidden")
        return web.Response(body=shared.data, content_type=shared.mimetype)

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        args = {**await _read_args(request), "name": request.match_info["name"]}
        answer = {"ok": True}
        with self._lock:
            self._state.calls.append(
                SlackCall("response_url", args, dict(request.headers), request.method, 200, answer)
            )
        return web.json_response(answer)

    async def _handle_socket(self, request: web.Request) -> web.StreamResponse:
        ticket = request.query.get("ticket", "")
        with self._lock:
            issued = ticket in self._state.tickets
            refusing = self._state.refusing_sockets
        if refusing:
            return web.Response(status=SOCKET_REFUSED_STATUS, text="Socket Mode is unavailable")
        if not issued:
            return web.Response(status=401, text="unknown Socket Mode ticket")
        socket = web.WebSocketResponse()  # answers the client's pings, as Slack does
        await socket.prepare(request)
        with self._lock:
            self._state.connections.append(ticket)
            self._state.live[ticket] = socket
        try:
            await socket.send_json(SOCKET_HELLO)
            async for frame in socket:
                if frame.type == WSMsgType.TEXT:
                    self._record_ack(frame.json())
        finally:
            with self._lock:
                del self._state.live[ticket]
        return socket

    def _record_ack(self, ack: dict[str, Any]) -> None:
        with self._lock:
            self._state.acks[ack["envelope_id"]] = SocketAck(ack["envelope_id"], ack.get("payload"))

    async def _close_sockets(self, app: web.Application | None = None) -> None:
        # A websocket handler runs until its connection ends; close them so stopping never waits.
        with self._lock:
            sockets = list(self._state.live.values())
        for socket in sockets:
            await socket.close()

    def _answer(self, method: str, args: Args, token: str | None) -> tuple[int, Answer, dict[str, str]]:
        """Status, body and extra headers for one call. Caller holds the lock."""
        if self._state.outage is not None:
            return self._state.outage, {"ok": False, "error": "service_unavailable"}, {}
        faults = self._state.faults.get(method)
        if faults:
            fault = faults.popleft()
            headers = {} if fault.retry_after is None else {"Retry-After": str(fault.retry_after)}
            return fault.status, {"ok": False, "error": fault.error}, headers
        try:
            if method not in KNOWN_METHODS:
                raise SlackError("unknown_method")
            self._check_token(method, token)
            answer = self._answers.get(method, _plain_ok)(args)
        except SlackError as error:
            return 200, {"ok": False, "error": error.error, **error.extra}, {}
        return 200, {"ok": True, **answer}, {}

    def _token_owner(self, token: str | None) -> StandinWorkspace | None:
        """The workspace a bot token was issued to, valid or not."""
        return next((w for w in self._state.workspaces.values() if token and token in w.tokens), None)

    def _check_token(self, method: str, token: str | None) -> None:
        if method in OAUTH_METHODS:
            return
        if self._state.workspaces and method not in APP_TOKEN_METHODS:
            caller = self._state.caller
            if caller is None:
                raise SlackError("invalid_auth" if token else "not_authed")
            if caller.uninstalled:
                raise SlackError("token_revoked")
            return
        expected, other = self.token, self.app_token
        if method in APP_TOKEN_METHODS:
            expected, other = other, expected
        if expected is None:
            return
        if not token:
            raise SlackError("not_authed")
        if token == other:
            raise SlackError("not_allowed_token_type")
        if token != expected:
            raise SlackError("invalid_auth")

    def _next_ts(self, after: object = None) -> str:
        """A new, increasing ts; with `after` (a thread's ts), also later than it, as a reply is."""
        self._state.counter += 1
        micros = self._state.counter * TS_STEP_MICROS
        if after:
            seconds, _, fraction = str(after).partition(".")
            floor = (int(seconds) - FIRST_TS_SECONDS) * 1_000_000 + int(fraction or 0)
            if micros <= floor:
                self._state.counter = floor // TS_STEP_MICROS + 1
                micros = self._state.counter * TS_STEP_MICROS
        return f"{FIRST_TS_SECONDS + micros // 1_000_000}.{micros % 1_000_000:06d}"

    # ----- method answers (called with the lock held) -----

    def _auth_revoke(self, args: Args) -> Answer:
        """The caller's token stops working; for a bot token, as the app being uninstalled."""
        if self._state.caller is not None:
            self._state.caller.uninstalled = True
        return {"revoked": True}

    def _auth_test(self, args: Args) -> Answer:
        caller = self._state.caller
        if caller is not None:
            return {
                "url": f"https://{caller.team.lower()}.slack.test/",
                "team": f"Team {caller.team}",
                "user": BOT_NAME,
                "team_id": None if caller.org_wide else caller.team,
                "enterprise_id": caller.enterprise,
                "user_id": caller.bot_user_id,
                "bot_id": f"B{caller.team}",
                "is_enterprise_install": caller.org_wide,
            }
        return {
            "url": "https://standin.slack.test/",
            "team": "Stand-in Team",
            "user": BOT_NAME,
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _oauth_access(self, args: Args) -> Answer:
        """Trade an installer's code (or a refresh token) for the workspace's bot token."""
        if args.get("client_id") != self.client_id:
            raise SlackError("invalid_client_id")
        if args.get("client_secret") != self.client_secret:
            raise SlackError("bad_client_secret")
        if args.get("grant_type") == "refresh_token":
            refresh = args.get("refresh_token")
            found = [
                w
                for w in self._state.workspaces.values()
                if refresh and w.refresh_token == refresh and not w.uninstalled
            ]
            if not found:
                raise SlackError("invalid_refresh_token")
            workspace = found[0]
        else:
            team = self._state.codes.pop(str(args.get("code")), None)
            if team is None:
                raise SlackError("invalid_code")
            workspace = self._state.workspaces[team]
        workspace.tokens.append(f"xoxb-{workspace.team}-{uuid.uuid4().hex[:12]}")
        answer: Answer = {
            "access_token": workspace.token,
            "token_type": "bot",
            "scope": "app_mentions:read,chat:write,commands",
            "bot_user_id": workspace.bot_user_id,
            "app_id": "A1",
            "team": None if workspace.org_wide else {"id": workspace.team, "name": f"Team {workspace.team}"},
            "enterprise": {"id": workspace.enterprise, "name": "Org"} if workspace.enterprise else None,
            "is_enterprise_install": workspace.org_wide,
            "authed_user": {"id": "UINSTALLER"},
        }
        if workspace.rotating:
            workspace.refresh_token = workspace.refresh_token or f"xoxe-1-{uuid.uuid4().hex}"
            answer |= {"refresh_token": workspace.refresh_token, "expires_in": ROTATING_EXPIRES_IN}
        return answer

    def _post_message(self, args: Args) -> Answer:
        channel = _validated_message(args)
        message = SlackMessage(
            channel=channel,
            ts=self._next_ts(args.get("thread_ts")),
            thread_ts=args.get("thread_ts"),
            text=args.get("text") or "",
            blocks=list(args.get("blocks") or []),
            metadata=args.get("metadata"),
            team=self._state.caller.team if self._state.caller else None,
        )
        self._state.messages[(channel, message.ts)] = message
        if message.thread_ts:
            self._state.statuses.pop((channel, message.thread_ts), None)
        return {"channel": channel, "ts": message.ts, "message": _message_json(message)}

    def _post_ephemeral(self, args: Args) -> Answer:
        _validated_message(args)
        if not args.get("user"):
            raise SlackError("user_not_in_channel")
        return {"message_ts": self._next_ts()}

    def _update(self, args: Args) -> Answer:
        channel = _validated_message(args)
        message = self._posted(channel, args.get("ts"))
        message.text = args.get("text") or ""
        message.blocks = list(args.get("blocks") or [])
        if "metadata" in args:
            message.metadata = args["metadata"]
        message.edits += 1
        return {
            "channel": channel,
            "ts": message.ts,
            "text": message.text,
            "message": _message_json(message),
        }

    def _delete(self, args: Args) -> Answer:
        message = self._posted(args.get("channel"), args.get("ts"))
        del self._state.messages[(message.channel, message.ts)]
        return {"channel": message.channel, "ts": message.ts}

    def _posted(self, channel: str | None, ts: str | None) -> SlackMessage:
        message = self._state.messages.get((channel or "", ts or ""))
        if message is None:
            raise SlackError("message_not_found")
        return message

    def _add_reaction(self, args: Args) -> Answer:
        names = self._state.reactions[_reaction_target(args)]
        if args["name"] in names:
            raise SlackError("already_reacted")
        names.add(args["name"])
        return {}

    def _remove_reaction(self, args: Args) -> Answer:
        names = self._state.reactions[_reaction_target(args)]
        if args["name"] not in names:
            raise SlackError("no_reaction")
        names.remove(args["name"])
        return {}

    def _set_status(self, args: Args) -> Answer:
        if not args.get("channel_id"):
            raise SlackError("channel_not_found")
        if not args.get("thread_ts"):
            raise SlackError("invalid_thread_ts")
        if "status" not in args:
            raise SlackError("invalid_arguments")
        thread = (str(args["channel_id"]), str(args["thread_ts"]))
        if args["status"]:
            self._state.statuses[thread] = str(args["status"])
        else:
            self._state.statuses.pop(thread, None)
        return {}

    def _set_title(self, args: Args) -> Answer:
        self._state.titles[_assistant_thread(args)] = str(args.get("title") or "")
        return {}

    def _set_prompts(self, args: Args) -> Answer:
        prompts = args.get("prompts")
        if not isinstance(prompts, list) or not all(
            isinstance(p, dict) and p.get("title") and p.get("message") for p in prompts
        ):
            raise SlackError("invalid_arguments")
        self._state.prompts[_assistant_thread(args)] = prompts
        return {}

    def _set_session_status(self, args: Args) -> Answer:
        """Make or move a thread's agent session; its title counts only when it is made."""
        thread = self._session_thread(args)
        status = str(args.get("status") or "")
        if status not in SESSION_STATUSES:
            raise SlackError("invalid_status")
        title = args.get("title")
        if title is not None:
            _check_session_title(title)
        session = self._state.sessions.setdefault(thread, AgentSession(status, title))
        session.status = status
        session.statuses.append(status)
        return {"status": status, "title": session.title}

    def _rename_session(self, args: Args) -> Answer:
        thread = self._session_thread(args)
        session = self._state.sessions.get(thread)
        if session is None:
            raise SlackError("session_not_found")
        title = args.get("title")
        _check_session_title(title)
        session.title = str(title)
        return {"title": session.title}

    def _session_thread(self, args: Args) -> tuple[str, str]:
        """The (channel, thread root ts) an ``agents.sessions.*`` call names; a ts that is not one
        (not a ts, or a reply in another thread) is refused as Slack does."""
        channel, thread_ts = _assistant_thread(args)
        known = self._state.messages.get((channel, thread_ts))
        replies = [
            m
            for m in self._state.thread_messages.get((channel, thread_ts), [])
            if m.get("ts") == thread_ts and m.get("thread_ts") not in (None, thread_ts)
        ]
        if not _TS.fullmatch(thread_ts) or replies or (known and known.thread_ts not in (None, thread_ts)):
            raise SlackError("invalid_thread_ts")
        return channel, thread_ts

    def _start_stream(self, args: Args) -> Answer:
        channel = args.get("channel")
        if not channel:
            raise SlackError("channel_not_found")
        if not args.get("thread_ts"):
            raise SlackError("invalid_arguments", errors=["thread_ts is required: a stream goes in a thread"])
        if not args.get("recipient_team_id"):
            raise SlackError("missing_recipient_team_id")
        if not args.get("recipient_user_id"):
            raise SlackError("missing_recipient_user_id")
        message = SlackMessage(
            channel=str(channel),
            ts=self._next_ts(args["thread_ts"]),
            thread_ts=str(args["thread_ts"]),
            text="",
            blocks=[],
            metadata=None,
            team=self._state.caller.team if self._state.caller else None,
            streaming=True,
            streamed=True,
        )
        _stream_into(message, args)
        self._state.messages[(message.channel, message.ts)] = message
        self._state.statuses.pop((message.channel, str(message.thread_ts)), None)
        return {"channel": message.channel, "ts": message.ts}

    def _append_stream(self, args: Args) -> Answer:
        message = self._stream(args)
        if not args.get("markdown_text") and not args.get("chunks"):
            raise SlackError("invalid_arguments")
        _stream_into(message, args)
        return {"channel": message.channel, "ts": message.ts}

    def _stop_stream(self, args: Args) -> Answer:
        message = self._stream(args)
        blocks = list(args.get("blocks") or [])
        problems = block_problems(blocks)
        if problems:
            raise SlackError("invalid_blocks", errors=problems)
        _stream_into(message, args)
        message.blocks = blocks
        if "metadata" in args:
            message.metadata = args["metadata"]
        message.streaming = False
        return {"channel": message.channel, "ts": message.ts, "message": _message_json(message)}

    def _stream(self, args: Args) -> SlackMessage:
        """The streamed message a ``chat.appendStream`` or ``chat.stopStream`` is for, still streaming."""
        message = self._posted(args.get("channel"), args.get("ts"))
        if not message.streaming:
            raise SlackError("message_not_in_streaming_state")
        return message

    def _open_view(self, args: Args) -> Answer:
        """A modal opened with a trigger id; a modal refused for its content leaves the trigger unused."""
        _check_modal(args.get("view"))
        if refusal := self.triggers.exchange(str(args.get("trigger_id") or ""), self.trigger_expiry):
            raise SlackError(refusal)
        return {"view": self._view(args, f"V{self._next_ts().replace('.', '')}")}

    def _update_view(self, args: Args) -> Answer:
        if not args.get("view_id") and not args.get("external_id"):
            raise SlackError("not_found")
        _check_modal(args.get("view"))
        return {"view": self._view(args, args.get("view_id") or args["external_id"])}

    def _publish_view(self, args: Args) -> Answer:
        user = args.get("user_id")
        if not user:
            raise SlackError("user_not_found")
        view = args.get("view")
        if not isinstance(view, dict) or view.get("type") != "home":
            raise SlackError("invalid_arguments")
        blocks = view.get("blocks") or []
        problems = block_problems(blocks, max_blocks=MAX_VIEW_BLOCKS)
        problems += [
            f"invalid slack file [json-pointer:/view/blocks/{i}/slack_file]"
            for i, block in enumerate(blocks)
            if block.get("type") == "image" and "slack_file" in block and not self._usable_file(block)
        ]
        if problems:
            raise SlackError("invalid_blocks", errors=problems)
        published = self._view(args, f"V{self._next_ts().replace('.', '')}")
        self._state.homes[str(user)] = published
        return {"view": published}

    def _usable_file(self, image: dict[str, Any]) -> bool:
        """Whether an image block's slack_file names a completed upload of the bot's, not deleted."""
        upload = self._state.uploads.get((image.get("slack_file") or {}).get("id", ""))
        return upload is not None and upload.completed and not upload.deleted

    def _users_conversations(self, args: Args) -> Answer:
        caller = self._state.caller
        member = args.get("user") or (caller.bot_user_id if caller else BOT_USER_ID)
        channels = [
            {"id": channel, "is_channel": True, "is_archived": False}
            for channel, members in self._state.members.items()
            if member in members
        ]
        return {"channels": channels, "response_metadata": {"next_cursor": ""}}

    def _user_group_members(self, args: Args) -> Answer:
        group = args.get("usergroup")
        if group not in self.user_groups:
            raise SlackError("no_such_subteam")
        return {"users": list(self.user_groups[group])}

    def _list_user_groups(self, args: Args) -> Answer:
        """Every group of `user_groups`, its handle the id in lower case."""
        return {"usergroups": [{"id": g, "handle": g.lower(), "name": g} for g in self.user_groups]}

    def _view(self, args: Args, view_id: str) -> dict[str, Any]:
        view = args.get("view")
        if not isinstance(view, dict):
            raise SlackError("invalid_arguments")
        return {**view, "id": view_id, "hash": self._next_ts(), "team_id": TEAM_ID}

    def _open_connection(self, args: Args) -> Answer:
        ticket = uuid.uuid4().hex
        self._state.tickets.add(ticket)
        return {"url": f"ws://{HOST}:{self.port}{SOCKET_PATH}?ticket={ticket}"}

    def _list_conversations(self, args: Args) -> Answer:
        channels = [{"id": id_, "name": name, "is_channel": True} for id_, name in self.channel_names.items()]
        return {"channels": channels, "response_metadata": {"next_cursor": ""}}

    def _no_messages(self, args: Args) -> Answer:
        return {"messages": [], "has_more": False, "response_metadata": {"next_cursor": ""}}

    def _replies(self, args: Args) -> Answer:
        """A thread's messages, oldest first, people's and the bot's, a page at a time (cursor: an
        offset), as Slack answers: only those between ``oldest`` and ``latest`` (each left out unless
        ``inclusive``), and the thread's parent first on the first page whatever the window."""
        channel, thread_ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        if not channel or not thread_ts:
            raise SlackError("invalid_arguments")
        bots = [
            _message_json(m)
            for m in self._state.messages.values()
            if m.channel == channel and m.thread_ts == thread_ts
        ]
        thread = sorted(
            [*self._state.thread_messages.get((channel, thread_ts), []), *bots],
            key=lambda m: Decimal(m["ts"]),
        )
        if not thread:
            raise SlackError("thread_not_found")
        window = [m for m in thread if _in_window(Decimal(m["ts"]), args)]
        start = int(args.get("cursor") or 0)
        end = start + int(args.get("limit") or REPLIES_PAGE_DEFAULT)
        more = end < len(window)
        page = window[start:end]
        parent = next((m for m in thread if m["ts"] == thread_ts), None)
        if start == 0 and parent is not None and parent not in page:
            page = [parent, *page]
        return {
            "messages": [{**m, "thread_ts": thread_ts} for m in page],
            "has_more": more,
            "response_metadata": {"next_cursor": str(end) if more else ""},
        }

    def _user_info(self, args: Args) -> Answer:
        user = self._state.users.get(str(args.get("user") or ""))
        if user is None:
            raise SlackError("user_not_found")
        return {"user": copy.deepcopy(user)}

    def _get_upload_url(self, args: Args) -> Answer:
        if not args.get("filename") or not str(args.get("length", "")).isdigit():
            raise SlackError("invalid_arguments")
        file_id = f"F{self._next_ts().replace('.', '')}"
        self._state.uploads[file_id] = Upload(file_id, args["filename"], int(args["length"]))
        return {"upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}

    def _complete_upload(self, args: Args) -> Answer:
        completed = []
        for item in args.get("files") or []:
            upload = self._state.uploads.get(item.get("id", ""))
            if upload is None or upload.data is None:
                raise SlackError("file_not_found")
            upload.title = item.get("title") or upload.filename
            upload.channel = args.get("channel_id")
            upload.thread_ts = args.get("thread_ts")
            upload.completed = True
            completed.append({"id": upload.file_id, "name": upload.filename, "title": upload.title})
        if not completed:
            raise SlackError("invalid_arguments")
        return {"files": completed}

    def _delete_file(self, args: Args) -> Answer:
        """files.delete of a file the bot uploaded (Slack lets a bot delete its own files)."""
        upload = self._state.uploads.get(str(args.get("file") or ""))
        if upload is None or not upload.completed:
            raise SlackError("file_not_found")
        if upload.deleted:
            raise SlackError("file_deleted")
        upload.deleted = True
        return {}


def _plain_ok(args: Args) -> Answer:
    return {}


async def _read_args(request: web.Request) -> Args:
    """Arguments from the query string and the body, whichever way slack_sdk encoded them."""
    args: Args = {k: _decode_form_value(k, v) for k, v in request.query.items()}
    if request.content_type == "application/json":
        if request.can_read_body:
            args.update(await request.json())
    elif request.content_type in ("application/x-www-form-urlencoded", "multipart/form-data"):
        for key, value in (await request.post()).items():
            raw = value.file.read() if isinstance(value, web.FileField) else value
            args[key] = _decode_form_value(key, raw)
    return args


def _decode_form_value(key: str, value: Any) -> Any:
    if key in JSON_FORM_FIELDS and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _basic_credentials(request: web.Request) -> Args:
    """The client id and secret of an HTTP Basic ``Authorization`` header (how slack_sdk sends them)."""
    scheme, _, encoded = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "basic":
        return {}
    client_id, _, secret = base64.b64decode(encoded).decode().partition(":")
    return {"client_id": client_id, "client_secret": secret}


def _bearer_token(request: web.Request) -> str | None:
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _assistant_thread(args: Args) -> tuple[str, str]:
    """The (channel, thread_ts) an ``assistant.threads.*`` call names; Slack refuses one without either."""
    if not args.get("channel_id"):
        raise SlackError("channel_not_found")
    if not args.get("thread_ts"):
        raise SlackError("invalid_thread_ts")
    return str(args["channel_id"]), str(args["thread_ts"])


def _stream_into(message: SlackMessage, args: Args) -> None:
    """Apply a stream call's ``markdown_text`` and ``chunks`` to the streamed message."""
    message.text += str(args.get("markdown_text") or "")
    for chunk in args.get("chunks") or []:
        kind = chunk.get("type")
        if kind == "markdown_text":
            message.text += str(chunk.get("text") or "")
        elif kind == "plan_update":
            message.plan_title = str(chunk.get("title") or "")
        elif kind == "task_update":
            if not chunk.get("id") or not chunk.get("title") or chunk.get("status") not in TASK_STATUSES:
                raise SlackError("invalid_chunks")
            message.tasks[str(chunk["id"])] = dict(chunk)
            message.task_updates.append(dict(chunk))
        elif kind == "blocks":
            message.blocks.extend(chunk.get("blocks") or [])
        else:
            raise SlackError("invalid_chunks")
    if len(message.text) > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")


def _check_session_title(title: Any) -> None:
    if not isinstance(title, str) or not title.strip():
        raise SlackError("invalid_title")
    if len(title) > MAX_SESSION_TITLE_CHARS:
        raise SlackError("title_too_long")


def _false(flag: Any) -> bool:
    """Whether a form or JSON argument is false as Slack reads it (``false``, ``0``, False)."""
    return flag is False or str(flag).lower() in {"false", "0"}


def _validated_message(args: Args) -> str:
    """The message's channel, after the checks Slack makes on a posted or updated message."""
    channel = args.get("channel")
    if not channel:
        raise SlackError("channel_not_found")
    blocks = args.get("blocks") or []
    if not args.get("text") and not blocks:
        raise SlackError("no_text")
    if len(args.get("text") or "") > MAX_TEXT_CHARS:
        raise SlackError("msg_too_long")
    problems = block_problems(blocks)
    if problems:
        raise SlackError("invalid_blocks", errors=problems)
    if sum(len(text) for text in block_texts(blocks)) > MAX_BLOCKS_TEXT_CHARS:
        raise SlackError("msg_blocks_too_long")
    return str(channel)


def _check_modal(view: Any) -> None:
    """Refuse a modal Slack would refuse (``views.open``, ``views.push``, ``views.update``)."""
    if not isinstance(view, dict) or view.get("type") != "modal":
        raise SlackError("invalid_arguments", errors=["a modal view is required [json-pointer:/view/type]"])
    if problems := modal_problems(view):
        raise SlackError("invalid_arguments", errors=problems)


def modal_problems(view: dict[str, Any]) -> list[str]:
    """Slack's complaints about a modal (empty when Slack would take it): its title and buttons'
    lengths, its blocks' count, and its block and element ids (an input without an element, ids
    used twice)."""
    problems = []
    for name in ("title", "submit", "close"):
        text = (view.get(name) or {}).get("text")
        if name == "title" and not text:
            problems.append("a title is required [json-pointer:/view/title]")
        if text is not None and len(text) > MAX_MODAL_TITLE_CHARS:
            problems.append(
                f"must be less than {MAX_MODAL_TITLE_CHARS + 1} characters [json-pointer:/view/{name}/text]"
            )
    blocks = view.get("blocks") or []
    problems += [
        p.replace("json-pointer:/", "json-pointer:/view/") for p in block_problems(blocks, MAX_VIEW_BLOCKS)
    ]
    block_ids = [block["block_id"] for block in blocks if "block_id" in block]
    problems += [f"duplicate block_id {id_!r} [json-pointer:/view/blocks]" for id_ in _twice(block_ids)]
    for index, block in enumerate(blocks):
        elements = [block["element"]] if "element" in block else list(block.get("elements") or [])
        if block.get("type") == "input" and "element" not in block:
            problems.append(f"an input needs an element [json-pointer:/view/blocks/{index}/element]")
        action_ids = [e["action_id"] for e in elements if isinstance(e, dict) and "action_id" in e]
        problems += [
            f"duplicate action_id {id_!r} [json-pointer:/view/blocks/{index}]" for id_ in _twice(action_ids)
        ]
    return problems


def _twice(ids: list[str]) -> list[str]:
    """The ids that occur more than once, each once."""
    return sorted({id_ for id_ in ids if ids.count(id_) > 1})


def block_problems(blocks: list[dict[str, Any]], max_blocks: int = MAX_BLOCKS) -> list[str]:
    """Slack's complaints about a message's (or view's) blocks (empty when Slack would accept them)."""
    problems = []
    if len(blocks) > max_blocks:
        problems.append(f"no more than {max_blocks} items allowed [json-pointer:/blocks]")
    for index, block in enumerate(blocks):
        pointer = f"/blocks/{index}"
        if block.get("type") == "markdown":
            if not 0 < len(block.get("text") or "") <= MARKDOWN_TEXT_LIMIT:
                problems.append(
                    f"must be 1 to {MARKDOWN_TEXT_LIMIT} characters [json-pointer:{pointer}/text]"
                )
            continue
        limit = BLOCK_TEXT_LIMITS.get(block.get("type", ""))
        text = (block.get("text") or {}).get("text", "")
        if limit is not None and len(text) > limit:
            problems.append(f"must be less than {limit + 1} characters [json-pointer:{pointer}/text/text]")
        fields = block.get("fields") or []
        if len(fields) > MAX_SECTION_FIELDS:
            problems.append(
                f"no more than {MAX_SECTION_FIELDS} items allowed [json-pointer:{pointer}/fields]"
            )
        problems += [
            f"must be less than {MAX_FIELD_CHARS + 1} characters [json-pointer:{pointer}/fields/{i}/text]"
            for i, item in enumerate(fields)
            if len(item.get("text", "")) > MAX_FIELD_CHARS
        ]
        if block.get("type") == "context" and len(block.get("elements", [])) > MAX_CONTEXT_ELEMENTS:
            problems.append(
                f"no more than {MAX_CONTEXT_ELEMENTS} items allowed [json-pointer:{pointer}/elements]"
            )
        problems += [
            f"must be less than {MAX_BUTTON_VALUE_CHARS + 1} characters "
            f"[json-pointer:{pointer}/elements/{i}/value]"
            for i, element in enumerate(block.get("elements", []))
            if len(str(element.get("value", ""))) > MAX_BUTTON_VALUE_CHARS
        ]
        if block.get("type") == "context_actions":
            problems += _context_actions_problems(block, pointer)
    return problems


def _context_actions_problems(block: dict[str, Any], pointer: str) -> list[str]:
    """Slack's complaints about a ``context_actions`` block: 1 to 5 feedback or icon buttons, each
    feedback button with a short plain text and a value."""
    elements = block.get("elements") or []
    problems = []
    if not 0 < len(elements) <= MAX_CONTEXT_ACTIONS:
        problems.append(f"must have 1 to {MAX_CONTEXT_ACTIONS} items [json-pointer:{pointer}/elements]")
    for i, element in enumerate(elements):
        where = f"{pointer}/elements/{i}"
        if element.get("type") not in CONTEXT_ACTIONS_ELEMENTS:
            problems.append(f"must be feedback_buttons or icon_button [json-pointer:{where}/type]")
        elif element["type"] == "feedback_buttons":
            if not element.get("action_id"):
                problems.append(f"an action_id is required [json-pointer:{where}/action_id]")
            for side in ("positive_button", "negative_button"):
                button = element.get(side) or {}
                text = (button.get("text") or {}).get("text") or ""
                if not 0 < len(text) <= MAX_FEEDBACK_TEXT_CHARS:
                    limit = f"must be 1 to {MAX_FEEDBACK_TEXT_CHARS} characters"
                    problems.append(f"{limit} [json-pointer:{where}/{side}/text]")
                if not button.get("value") or len(str(button["value"])) > MAX_BUTTON_VALUE_CHARS:
                    problems.append(f"a value is required [json-pointer:{where}/{side}/value]")
    return problems


def _in_window(ts: Decimal, args: Args) -> bool:
    """Whether a message at `ts` is between a history call's ``oldest`` and ``latest`` (Slack's
    defaults: 0 and now), each bound itself only with ``inclusive``."""
    inclusive = str(args.get("inclusive") or "").lower() in {"1", "true"}
    oldest, latest = Decimal(str(args.get("oldest") or 0)), args.get("latest")
    after = ts >= oldest if inclusive else ts > oldest
    if latest is None:
        return after
    return after and (ts <= Decimal(str(latest)) if inclusive else ts < Decimal(str(latest)))


def _message_json(message: SlackMessage) -> dict[str, Any]:
    # As auth.test names the bot of the workspace whose token posted it (`StandinWorkspace`).
    user, bot = (f"U{message.team}BOT", f"B{message.team}") if message.team else (BOT_USER_ID, BOT_ID)
    body: dict[str, Any] = {
        "type": "message",
        "user": user,
        "bot_id": bot,
        "text": message.text,
        "ts": message.ts,
        "blocks": message.blocks,
    }
    if message.thread_ts:
        body["thread_ts"] = message.thread_ts
    if message.metadata:
        body["metadata"] = message.metadata
    return body


def _reaction_target(args: Args) -> tuple[str, str]:
    if not args.get("name"):
        raise SlackError("invalid_name")
    if not args.get("channel") or not args.get("timestamp"):
        raise SlackError("message_not_found")
    return str(args["channel"]), str(args["timestamp"])


def block_texts(node: Any) -> Iterator[str]:
    """Every string stored under a ``text`` key anywhere inside Block Kit JSON, in document order."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "text" and isinstance(value, str):
                yield value
            else:
                yield from block_texts(value)
    elif isinstance(node, list):
        for item in node:
            yield from block_texts(item)
