"""Attached files: which ones can be read, downloading them with the bot token, and their text.

Text-like files are decoded as UTF-8 (bad bytes replaced); a PDF's text is extracted page by page
with pypdf, in a bounded child process (`bot.material.pdf`). Images, archives, other binary formats
and files over the size limit are not read;
each such file, and each download that fails, becomes an `Unread` naming the file and the reason.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any, Literal
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ConfigDict, Field

logger = logging.getLogger(__name__)

FileKind = Literal["text", "pdf"]
"""How a readable file is read."""

DOWNLOAD_TIMEOUT_SECONDS = 30.0
"""Seconds one file's download may take; a slower one is reported as not read."""

SLACK_FILE_HOST = "files.slack.com"
"""Where Slack serves files; the bot token is sent to no other host (but the configured Web API's,
which is a stand-in's in tests)."""

TEXT_MIMETYPES = frozenset(
    {
        "application/json",
        "application/ld+json",
        "application/x-ndjson",
        "application/xml",
        "application/yaml",
        "application/x-yaml",
        "application/toml",
        "application/javascript",
        "application/typescript",
        "application/sql",
        "application/x-sh",
        "application/x-python",
        "application/csv",
    }
)
"""Media types besides ``text/*`` that hold text."""

TEXT_EXTENSION_GROUPS = (
    "txt text md markdown rst adoc org tex bib log diff patch",
    "csv tsv json jsonl ndjson yaml yml toml ini cfg conf env properties xml",
    "html htm css scss less svg graphql proto sql",
    "py pyi js mjs cjs jsx ts tsx vue svelte go rs java kt kts scala groovy gradle swift dart",
    "c h cc cpp cxx hpp hh cs fs m mm rb php pl pm lua r jl ex exs erl hs clj elm ml",
    "sh bash zsh fish ps1 bat cmd mk cmake dockerfile makefile tf hcl",
)
"""File name extensions of text formats and source code, by family (Slack often says only
``application/octet-stream`` for them)."""

TEXT_EXTENSIONS = frozenset(extension for group in TEXT_EXTENSION_GROUPS for extension in group.split())
"""Every extension of `TEXT_EXTENSION_GROUPS`."""

TEXT_FILETYPES = frozenset(
    {"text", "markdown", "post", "csv", "json", "yaml", "xml", "html", "javascript", "python"}
)
"""Slack's own ``filetype`` names of text formats besides the extensions above."""

ARCHIVE_EXTENSIONS = frozenset({"zip", "gz", "tgz", "tar", "bz2", "xz", "7z", "rar", "zst", "jar", "iso"})
"""Archives and disk images: not unpacked."""

ARCHIVE_MIMETYPES = frozenset(
    {
        "application/zip",
        "application/gzip",
        "application/x-gzip",
        "application/x-tar",
        "application/x-bzip2",
        "application/x-xz",
        "application/x-7z-compressed",
        "application/vnd.rar",
        "application/x-rar-compressed",
        "application/zstd",
    }
)
"""Media types of archives."""

READABLE_KINDS = "text files (plain text, Markdown, CSV, JSON, YAML, source code) and PDFs"
"""What the bot reads, for the reasons it gives."""


class SharedFile(BaseModel):
    """A file attached to a Slack message, as the message event describes it."""

    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    mimetype: str = ""
    filetype: str = ""
    size: int = 0
    url: str | None = Field(None, description="url_private_download: needs the bot token")

    @property
    def extension(self) -> str:
        """The name's extension, lower case, without the dot ('' without one; a Dockerfile's name)."""
        path = PurePosixPath(self.name.lower())
        return path.suffix.removeprefix(".") or path.name


class UnreadableFile(Exception):
    """A file that cannot be read; `str()` is the reason, said in the thread."""


def shared_files(event: Mapping[str, Any]) -> tuple[SharedFile, ...]:
    """The files attached to a message event (none when it has none)."""
    return tuple(
        SharedFile(
            id=str(entry.get("id") or ""),
            name=str(entry.get("name") or entry.get("title") or entry.get("id") or "unnamed file"),
            mimetype=str(entry.get("mimetype") or ""),
            filetype=str(entry.get("filetype") or ""),
            size=int(entry.get("size") or 0),
            url=entry.get("url_private_download") or entry.get("url_private"),
        )
        for entry in event.get("files") or []
        if isinstance(entry, dict)
    )


def kind_of(file: SharedFile, max_bytes: int) -> FileKind:
    """How `file` is read; `UnreadableFile` saying why when it is not."""
    mimetype = file.mimetype.lower()
    if file.size > max_bytes:
        raise UnreadableFile(f"it is {_size(file.size)}, over the {_size(max_bytes)} the bot reads")
    if mimetype == "application/pdf" or file.extension == "pdf":
        return "pdf"
    if mimetype.startswith("image/"):
        raise UnreadableFile(f"an image; the bot reads {READABLE_KINDS}")
    if mimetype in ARCHIVE_MIMETYPES or file.extension in ARCHIVE_EXTENSIONS:
        raise UnreadableFile(f"an archive; the bot reads {READABLE_KINDS}, not archives")
    if (
        mimetype.startswith("text/")
        or mimetype in TEXT_MIMETYPES
        or file.extension in TEXT_EXTENSIONS
        or file.filetype in TEXT_FILETYPES
    ):
        return "text"
    described = file.mimetype or file.filetype or "an unknown type"
    raise UnreadableFile(f"not a kind of file the bot reads ({described}); it reads {READABLE_KINDS}")


def decoded_text(data: bytes) -> str:
    """UTF-8 text, bad bytes replaced by U+FFFD; binary content (NUL bytes) is refused."""
    if b"\x00" in data:
        raise UnreadableFile("binary content, not text")
    return data.decode("utf-8", errors="replace").removeprefix("\ufeff")


def may_get_token(url: str, api_url: str) -> bool:
    """Whether the bot token may be sent to `url`: Slack's file host, or the configured Web API's."""
    target, api = urlsplit(url), urlsplit(api_url)
    if target.scheme not in ("https", "http"):
        return False
    return (target.scheme == "https" and target.hostname == SLACK_FILE_HOST) or (
        target.scheme,
        target.netloc,
    ) == (api.scheme, api.netloc)


async def download(
    session: aiohttp.ClientSession,
    file: SharedFile,
    token: str,
    max_bytes: int,
    timeout: float = DOWNLOAD_TIMEOUT_SECONDS,
) -> bytes:
    """The file's bytes, fetched with the bot token within `timeout` seconds; `UnreadableFile`
    saying why the download failed."""
    if not file.url:
        raise UnreadableFile("Slack did not give the bot a link to it")
    try:
        async with session.get(
            file.url,
            headers={"Authorization": f"Bearer {token}"},
            timeout=aiohttp.ClientTimeout(total=timeout),
        ) as response:
            if response.status != 200:
                raise UnreadableFile(f"the download failed: Slack answered HTTP {response.status}")
            if response.content_type == "text/html" and not file.mimetype.startswith("text/html"):
                raise UnreadableFile(
                    "the download failed: Slack sent a sign-in page (does the app have the files:read scope?)"
                )
            data = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                data += chunk
                if len(data) > max_bytes:
                    raise UnreadableFile(f"it is over the {_size(max_bytes)} the bot reads")
            return bytes(data)
    except TimeoutError as exc:
        raise UnreadableFile(f"the download took longer than {timeout:g} s") from exc
    except aiohttp.ClientError as exc:
        logger.warning("downloading file %s failed: %s", file.id, type(exc).__name__)
        raise UnreadableFile(f"the download failed ({type(exc).__name__})") from exc


def _size(count: int) -> str:
    """``1.5 MB``, ``900 KB``, ``12 bytes``."""
    if count >= 1_000_000:
        return f"{count / 1_000_000:.3g} MB"
    if count >= 1_000:
        return f"{count / 1_000:.3g} KB"
    return f"{count} bytes"
