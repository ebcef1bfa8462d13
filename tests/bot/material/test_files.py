"""Attached files: which are read, how their text comes out, and where the bot token may go."""

from __future__ import annotations

import multiprocessing

import pytest

from bot.material.files import (
    SharedFile,
    UnreadableFile,
    decoded_text,
    kind_of,
    may_get_token,
    shared_files,
)
from bot.material.pdf import MAX_PAGES, bounded_pdf_text, pdf_text
from bot.material.reader import MAX_FILES_CHARS
from tests.documents import pdf_bytes, shared_stream_pdf

LIMIT = 1_000_000


def shared(name: str, mimetype: str = "", size: int = 10, filetype: str = "") -> SharedFile:
    return SharedFile(id="F1", name=name, mimetype=mimetype, size=size, filetype=filetype, url="https://x")


@pytest.mark.parametrize(
    ("name", "mimetype"),
    [
        ("notes.txt", "text/plain"),
        ("table.csv", "text/csv"),
        ("data.json", "application/json"),
        ("deploy.yaml", "application/octet-stream"),
        ("README.md", ""),
        ("main.py", "application/octet-stream"),
        ("lib.rs", ""),
        ("Dockerfile", "application/octet-stream"),
    ],
)
def test_text_formats_and_source_code_are_read_as_text(name, mimetype):
    assert kind_of(shared(name, mimetype), LIMIT) == "text"


def test_a_pdf_is_read_as_a_pdf_by_type_or_by_name():
    assert kind_of(shared("spec.pdf", "application/pdf"), LIMIT) == "pdf"
    assert kind_of(shared("spec.PDF", "application/octet-stream"), LIMIT) == "pdf"


@pytest.mark.parametrize(
    ("file", "reason"),
    [
        (shared("chart.png", "image/png"), "an image"),
        (shared("logo.svg", "image/svg+xml"), "an image"),
        (shared("code.zip", "application/zip"), "an archive"),
        (shared("logs.tar.gz", "application/octet-stream"), "an archive"),
        (shared("deck.pptx", "application/vnd.ms-powerpoint"), "not a kind of file the bot reads"),
        (shared("big.txt", "text/plain", size=LIMIT + 1), "over the 1 MB the bot reads"),
    ],
)
def test_images_archives_other_binaries_and_oversized_files_are_not_read_and_say_why(file, reason):
    with pytest.raises(UnreadableFile, match=reason):
        kind_of(file, LIMIT)


def test_text_is_utf8_with_bad_bytes_replaced_and_no_byte_order_mark():
    assert decoded_text("\ufeffcafé ok".encode() + b"\xff!") == "café ok\ufffd!"


def test_binary_content_behind_a_text_name_is_refused():
    with pytest.raises(UnreadableFile, match="binary"):
        decoded_text(b"PK\x03\x04\x00\x00")


def test_a_pdfs_text_comes_page_by_page():
    text = pdf_text(pdf_bytes("First page words", "Second page words"), MAX_FILES_CHARS)
    assert text == "--- page 1 ---\nFirst page words\n--- page 2 ---\nSecond page words"


def test_a_broken_or_textless_pdf_is_unreadable_with_a_reason():
    with pytest.raises(UnreadableFile, match="could not be read"):
        pdf_text(b"%PDF-1.4 this is not really a pdf", MAX_FILES_CHARS)
    with pytest.raises(UnreadableFile, match="no text"):
        pdf_text(pdf_bytes(""), MAX_FILES_CHARS)


# -- hostile PDFs: each is small to download and asks for far more to read ----------------------


def test_thousands_of_pages_sharing_one_content_stream_are_refused_by_their_count():
    hostile = shared_stream_pdf(pages=3_000, text_bytes=5_000_000)
    assert len(hostile) < 1_000_000  # well under the download limit
    with pytest.raises(UnreadableFile, match=f"a PDF of 3,000 pages; the bot reads up to {MAX_PAGES:,}"):
        pdf_text(hostile, MAX_FILES_CHARS)


def test_text_past_the_cap_stops_the_extraction_at_the_page_that_passes_it():
    hostile = shared_stream_pdf(pages=MAX_PAGES, text_bytes=2_000_000)
    with pytest.raises(UnreadableFile, match=f"past the {MAX_FILES_CHARS:,} characters .*by page 1 of 500"):
        bounded_pdf_text(hostile, MAX_FILES_CHARS)


def test_a_stream_that_expands_past_the_limit_is_not_decompressed():
    hostile = shared_stream_pdf(pages=1, text_bytes=30_000_000)
    assert len(hostile) < 200_000  # a 150-fold expansion
    with pytest.raises(UnreadableFile, match="could not be read"):
        bounded_pdf_text(hostile, 10**9)


def test_a_pdf_the_child_cannot_read_in_its_time_or_memory_is_named_and_the_child_is_gone():
    hostile = shared_stream_pdf(pages=MAX_PAGES, text_bytes=5_000_000)
    with pytest.raises(UnreadableFile, match=r"takes more than 0\.001 seconds"):
        pdf_text(hostile, 10**9, seconds=0.001)
    with pytest.raises(UnreadableFile, match="needs more memory"):
        pdf_text(hostile, 10**9, memory=64 * 1024 * 1024)
    assert multiprocessing.active_children() == []


def test_the_token_goes_only_to_slacks_file_host_or_the_configured_api_host():
    api = "http://127.0.0.1:5555/api/"
    assert may_get_token("https://files.slack.com/files-pri/T1-F1/download/a.txt", "https://slack.com/api/")
    assert may_get_token("http://127.0.0.1:5555/files-pri/F1/download/a.txt", api)
    assert not may_get_token("http://files.slack.com/files-pri/F1/a.txt", "https://slack.com/api/")
    assert not may_get_token("https://evil.example/files-pri/F1/a.txt", "https://slack.com/api/")
    assert not may_get_token("http://127.0.0.1:6666/files-pri/F1/a.txt", api)


def test_files_come_from_the_events_file_objects():
    event = {
        "files": [
            {
                "id": "F1",
                "name": "a.csv",
                "mimetype": "text/csv",
                "filetype": "csv",
                "size": 12,
                "url_private_download": "https://files.slack.com/files-pri/T1-F1/download/a.csv",
            },
            {"id": "F2", "mode": "hidden_by_limit"},
        ]
    }
    first, hidden = shared_files(event)
    assert (first.name, first.size, first.url) == ("a.csv", 12, event["files"][0]["url_private_download"])
    assert (hidden.name, hidden.url) == ("F2", None)
    assert shared_files({"text": "no files"}) == ()
