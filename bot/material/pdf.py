"""A PDF's text, read where a hostile file cannot hold the bot: in a child process with a memory
limit and a deadline, killed when either is reached.

A PDF of well under the download limit can still ask for much more: a compressed stream may expand
a thousandfold, thousands of pages may share one content stream that is parsed again for each. So
the child decompresses at most `STREAM_MAX_BYTES` per stream (pypdf's configuration), refuses more
than `MAX_PAGES` pages, and stops as soon as the text passes what the worker can be given (the cap
applies while extracting, not after). It runs under ``RLIMIT_AS`` of `CHILD_MEMORY_BYTES` and is killed after
`DEADLINE_SECONDS`: a file that needs more fails on its own, named as not read, and the process
that asked (and, on PostgreSQL, a worker retrying the job) goes on. Children are forked from a
forkserver that has this module loaded, so each starts in milliseconds, and import nothing more
before their limit applies (see `keep_main_out_of_children`).
"""

from __future__ import annotations

import importlib.util
import io
import multiprocessing
import resource
import sys
from multiprocessing.connection import Connection
from typing import Literal

from pypdf import Configuration, PdfReader, apply_configuration

from bot.material.files import UnreadableFile

MAX_PAGES = 500
"""Pages of one PDF the bot reads at most; a longer one is not read."""

STREAM_MAX_BYTES = 10_000_000
"""Decompressed bytes any one stream of a PDF may expand to (pypdf's default is 75 MB)."""

CHILD_MEMORY_BYTES = 1_024 * 1_024 * 1_024
"""Address space of the child reading one PDF (the interpreter and its libraries take about a
third of it): a file needing more fails with MemoryError there, not in the bot."""

DEADLINE_SECONDS = 20.0
"""Seconds the child may take to read one PDF before it is killed."""

_CONTEXT = multiprocessing.get_context("forkserver")
_CONTEXT.set_forkserver_preload([__name__])


def keep_main_out_of_children() -> None:
    """Have the children that read PDFs skip the process's main script, as they do for ``python -m
    bot``. Under the ``rubric-bot`` console script, ``__main__`` is the script file, and
    multiprocessing runs it again in each child before its target: the child would import the whole
    bot (the script's ``from bot.cli.main import main``) before `_read_in_child` sets its memory
    limit. A main module named ``….__main__`` is one multiprocessing does not run again."""
    main = sys.modules["__main__"]
    if getattr(main, "__spec__", None) is None:
        main.__spec__ = importlib.util.find_spec("bot.__main__")


Outcome = tuple[Literal["text", "unreadable"], str]
"""What the child sends back: the text, or why there is none."""


def pdf_text(
    data: bytes, max_chars: int, *, seconds: float = DEADLINE_SECONDS, memory: int = CHILD_MEMORY_BYTES
) -> str:
    """A PDF's text, page by page under ``--- page N ---`` lines, read in a child process given
    `seconds` and `memory` bytes of address space; `UnreadableFile` saying why when there is none
    to be had within the bounds."""
    receiving, sending = _CONTEXT.Pipe(duplex=False)
    child = _CONTEXT.Process(target=_read_in_child, args=(sending, data, max_chars, memory), daemon=True)
    child.start()
    sending.close()
    try:
        if not receiving.poll(seconds):
            raise UnreadableFile(f"a PDF that takes more than {seconds:g} seconds to read")
        try:
            kind, value = receiving.recv()
        except EOFError:  # the child died: out of memory, most likely
            raise UnreadableFile("a PDF that needs more memory to read than the bot gives a file") from None
    finally:
        child.kill()
        child.join()
        receiving.close()
    if kind == "unreadable":
        raise UnreadableFile(value)
    return value


def _read_in_child(sending: Connection, data: bytes, max_chars: int, memory: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    outcome: Outcome
    try:
        outcome = ("text", bounded_pdf_text(data, max_chars))
    except UnreadableFile as exc:
        outcome = ("unreadable", str(exc))
    except MemoryError:
        outcome = ("unreadable", "a PDF that needs more memory to read than the bot gives a file")
    sending.send(outcome)
    sending.close()


def bounded_pdf_text(data: bytes, max_chars: int) -> str:
    """A PDF's text within the bounds, in this process (the child's work)."""
    try:
        with apply_configuration(_BOUNDS):
            return _pages_text(data, max_chars)
    except UnreadableFile:
        raise
    except MemoryError:
        raise
    except Exception as exc:  # pypdf raises many types (and plain ValueErrors) on broken files
        raise UnreadableFile(f"a PDF that could not be read ({type(exc).__name__})") from exc


def _pages_text(data: bytes, max_chars: int) -> str:
    """The text of the PDF's pages, refusing more than `MAX_PAGES` and stopping once past `max_chars`."""
    reader = PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise UnreadableFile("a password-protected PDF")
    count = len(reader.pages)
    if count > MAX_PAGES:
        raise UnreadableFile(f"a PDF of {count:,} pages; the bot reads up to {MAX_PAGES:,}")
    pages: list[str] = []
    chars = 0
    for number, page in enumerate(reader.pages, start=1):
        text = (page.extract_text() or "").strip()
        pages.append(f"--- page {number} ---\n{text}")
        chars += len(pages[-1]) + 1
        if chars > max_chars:
            raise UnreadableFile(
                f"its text goes past the {max_chars:,} characters the worker can be given "
                f"(by page {number} of {count:,})"
            )
    if not any(page.split("\n", 1)[1] for page in pages):
        raise UnreadableFile("a PDF with no text in it (a scan?)")
    return "\n".join(pages)


_BOUNDS = Configuration().with_overwrites(
    **dict.fromkeys(
        (
            "maximum_declared_stream_length",
            "array_based_stream_maximum_output_length",
            "zlib_maximum_output_length",
            "lzw_maximum_output_length",
            "run_length_maximum_output_length",
            "brotli_maximum_output_length",
            "jbig2_maximum_output_length",
        ),
        STREAM_MAX_BYTES,
    )
)
"""pypdf's limits (`pypdf.Configuration`) lowered to `STREAM_MAX_BYTES` while the bot reads a PDF."""
