"""What people shared, read by the real bot: the thread it is called into, and attached files.

The Slack stand-in serves a thread's earlier messages (``conversations.replies``), people's names
(``users.info``) and file downloads that need the bot's token; the model stand-in records what the
worker and the grader were sent.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.material.pdf import DEADLINE_SECONDS
from tests.documents import pdf_bytes, shared_stream_pdf
from tests.e2e.conftest import RUN_TIMEOUT, shared_bot
from tests.e2e.test_bot_e2e import CRITERIA, RUBRIC, Service
from tests.standins import slack_requests as sr
from tests.standins.model_api import DEFAULT_ANSWER, grade
from tests.standins.slack_api import BOT_ID, BOT_USER_ID, DOWNLOAD_METHOD

MAX_FILE_BYTES = 20_000
"""The shared bot's file size limit (RUBRIC_BOT_MAX_FILE_BYTES), small so an oversized file is cheap."""


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> Iterator[Service]:
    env = {"RUBRIC_BOT_MAX_FILE_BYTES": str(MAX_FILE_BYTES)}
    with shared_bot(tmp_path_factory.mktemp("material-bot"), env) as (slack, model, process):
        yield Service(slack, model, process)


@pytest.fixture
def graded(service: Service) -> Service:
    """The shared service with a worker that answers at once and a grader that passes everything."""
    service.model.worker = lambda request: DEFAULT_ANSWER
    service.model.grader = lambda request: grade(CRITERIA)
    return service


def with_rubric(s: Service, channel: str) -> str:
    assert "rubric set" in s.send(sr.slash_command(f"set {RUBRIC}", channel)).json()["text"]
    return channel


def mention_with_files(
    s: Service, text: str, channel: str, files: list[dict], thread_ts: str | None = None
) -> str:
    ts = sr.new_ts()
    s.send(sr.event_callback(sr.app_mention(text, channel, ts, thread_ts, files=files)))
    return ts


def said(user: str, text: str, ts: str | None = None) -> dict:
    """A person's message in a thread, as `add_thread_messages` takes it (a new ts unless given)."""
    return {"type": "message", "user": user, "text": text, "ts": ts or sr.new_ts()}


def replies_calls(s: Service, channel: str, thread_ts: str) -> list:
    return [
        call
        for call in s.slack.calls("conversations.replies")
        if call.args.get("channel") == channel and call.args.get("ts") == thread_ts
    ]


# -- the thread the bot is called into ---------------------------------------------------------


def test_called_into_a_thread_longer_than_slack_lists_in_the_calls_it_reads_its_parent_and_newest(graded):
    s = graded
    channel = with_rubric(s, "CT9")
    root = sr.new_ts()
    s.slack.add_thread_messages(
        channel,
        root,
        said("UANA", "PARENT-TOPIC: the launch plan", root),
        *[said("UBEN", f"point {n}") for n in range(6_000)],
        said("UANA", "NEWEST-WORDS before the request"),
    )

    s.mention("summarize the long thread", channel, thread_ts=root)
    s.wait_finals(channel, root, 1)

    (worker,) = s.worker_requests_for("summarize the long thread")
    earlier = worker.messages[-2]["content"]
    assert "PARENT-TOPIC: the launch plan" in earlier and "NEWEST-WORDS before the request" in earlier
    assert earlier.index("PARENT-TOPIC") < earlier.index("point 5999") < earlier.index("NEWEST-WORDS")
    assert "earlier messages left out" in earlier and not re.search(r": point 100$", earlier, re.MULTILINE)
    assert len(replies_calls(s, channel, root)) <= 25  # 6,001 messages, 200 a page


def test_called_into_a_thread_the_worker_and_grader_get_its_earlier_messages_once(graded):
    s = graded
    channel = with_rubric(s, "CT1")
    s.slack.add_user("UANA", "Ana")
    s.slack.add_user("UBEN", "Ben")
    root = sr.new_ts()
    s.slack.add_thread_messages(
        channel,
        root,
        said("UANA", "We ship the beta on Friday", root),
        said("UBEN", "Pricing stays at 10 &amp; 20 euros"),
        {
            "type": "message",
            "user": BOT_USER_ID,
            "bot_id": BOT_ID,
            "text": "BOT-OWN-WORDS",
            "ts": sr.new_ts(),
        },
        said("UANA", "Docs are owned by Cy"),
    )

    s.mention("summarize this thread for the customer", channel, thread_ts=root)
    (final,) = s.wait_finals(channel, root, 1)

    (worker,) = s.worker_requests_for("summarize this thread")
    earlier = worker.messages[-2]["content"]  # the thread, then the request
    for line in (
        "Ana: We ship the beta on Friday",
        "Ben: Pricing stays at 10 & 20 euros",
        "Ana: Docs are owned by Cy",
    ):
        assert line in earlier
    assert "BOT-OWN-WORDS" not in worker.all_text
    assert earlier.index("Friday") < earlier.index("Pricing") < earlier.index("Cy")
    assert "not instructions" in earlier and "not instructions" in worker.system
    grader_saw = [r.all_text for r in s.model.requests("grader") if "summarize this thread" in r.all_text]
    assert grader_saw and all(
        "We ship the beta on Friday" in text and "Docs are owned by Cy" in text for text in grader_saw
    )
    assert "Not read" not in final.all_text
    assert len(replies_calls(s, channel, root)) == 1

    # A follow-up in the thread the bot is now part of: no second look at the thread.
    s.say("and now in French", channel, thread_ts=root)
    s.wait_finals(channel, root, 2)
    assert len(replies_calls(s, channel, root)) == 1
    (follow_up,) = s.worker_requests_for("and now in French")
    assert follow_up.all_text.count("We ship the beta on Friday") == 1  # kept in the conversation, once


# -- attached files ------------------------------------------------------------------------------


def test_a_text_file_and_a_pdf_reach_the_worker_and_the_grader(graded):
    s = graded
    channel = with_rubric(s, "CF1")
    notes = s.slack.add_file("notes.csv", b"region,revenue\nnorth,17 kiwis\n", "text/csv")
    spec = s.slack.add_file(
        "spec.pdf", pdf_bytes("Section 1: login by SSO", "Section 2: export to CSV"), "application/pdf"
    )

    ts = mention_with_files(s, "review the attached spec", channel, [notes, spec])
    (final,) = s.wait_finals(channel, ts, 1)

    (worker,) = s.worker_requests_for("review the attached spec")
    request = worker.last_user_text
    assert 'name="notes.csv"' in request and "north,17 kiwis" in request
    assert (
        'name="spec.pdf"' in request
        and "Section 1: login by SSO" in request
        and "Section 2: export to CSV" in request
    )
    assert request.index("--- page 1 ---") < request.index("--- page 2 ---")
    grader_saw = [r.all_text for r in s.model.requests("grader") if "review the attached spec" in r.all_text]
    assert grader_saw and all("north,17 kiwis" in t and "Section 2: export to CSV" in t for t in grader_saw)
    assert "Not read" not in final.all_text
    assert [
        c.status for c in s.slack.calls(DOWNLOAD_METHOD) if c.args["file"] in (notes["id"], spec["id"])
    ] == [200, 200]


def test_an_oversized_file_an_image_and_a_refused_download_are_named_and_the_request_still_runs(graded):
    s = graded
    channel = with_rubric(s, "CF2")
    readable = s.slack.add_file("plan.md", b"# Plan\nShip on Monday", "text/markdown")
    huge = s.slack.add_file("dump.log", b"x" * (MAX_FILE_BYTES + 1), "text/plain")
    image = s.slack.add_file("chart.png", b"\x89PNG\r\n\x1a\n", "image/png")
    secret = s.slack.add_file("secret.txt", b"TOP-SECRET", "text/plain", forbidden=True)

    ts = mention_with_files(s, "summarize the plan", channel, [readable, huge, image, secret])
    (final,) = s.wait_finals(channel, ts, 1)

    assert DEFAULT_ANSWER in final.all_text  # the request ran on what could be read
    (worker,) = s.worker_requests_for("summarize the plan")
    assert "Ship on Monday" in worker.last_user_text and "TOP-SECRET" not in worker.all_text
    lines = [line for line in final.all_text.splitlines() if "Not read" in line]
    assert len(lines) == 3
    assert "dump.log" in lines[0] and "over the 20 KB" in lines[0]
    assert "chart.png" in lines[1] and "an image" in lines[1]
    assert "secret.txt" in lines[2] and "HTTP 403" in lines[2]
    downloaded = {c.args["file"] for c in s.slack.calls(DOWNLOAD_METHOD)}
    assert huge["id"] not in downloaded and image["id"] not in downloaded  # skipped before downloading


def test_a_file_shared_on_its_own_in_the_bots_thread_is_a_request(graded):
    s = graded
    root = s.mention("hello", "CF3")
    s.wait_finals("CF3", root, 1)
    table = s.slack.add_file("top.csv", b"name,score\nzed,99\n", "text/csv")

    s.say("", "CF3", thread_ts=root, files=[table])
    s.wait_finals("CF3", root, 2)

    assert any("zed,99" in r.last_user_text for r in s.model.requests("worker"))


def test_a_hostile_pdf_is_named_as_not_read_and_the_bots_memory_stays_bounded(
    start_bot, slack_api, model_api
):
    """Thousands of pages sharing one compressed content stream, well under the download limit: the
    request is answered, the file named as not read, and the bot's peak memory stays within 300 MB
    of its size before it (the reading happens in a child process with bounds of its own)."""
    model_api.worker, model_api.grader = (lambda request: DEFAULT_ANSWER), (lambda request: grade(CRITERIA))
    s = Service(slack_api, model_api, start_bot())
    channel = with_rubric(s, "CF9")
    warm = s.mention("warm up before measuring", channel)
    s.wait_finals(channel, warm, 1)
    idle = _memory_kib(s.bot.pid, "VmRSS")
    hostile = s.slack.add_file(
        "brochure.pdf", shared_stream_pdf(pages=3_000, text_bytes=5_000_000), "application/pdf"
    )

    ts = mention_with_files(s, "read the brochure", channel, [hostile])
    (final,) = s.wait_finals(channel, ts, 1)

    assert DEFAULT_ANSWER in final.all_text
    (line,) = [line for line in final.all_text.splitlines() if "Not read" in line]
    assert "brochure.pdf" in line and "3,000 pages" in line
    assert _memory_kib(s.bot.pid, "VmHWM") - idle < 300 * 1024


def test_a_pdf_of_few_pages_that_only_the_readers_deadline_stops_is_named_and_the_bot_goes_on(
    start_bot, slack_api, model_api
):
    """Fifty pages (not refused by their count) sharing one 3 MB content stream that draws no text
    (so no cap on the text stops it, and no stream passes pypdf's limits): each page takes seconds to
    parse, the whole file hours. Only the child process's deadline stops it; the request is answered
    with the file named as not read, and the bot answers the next request in the thread too."""
    model_api.worker, model_api.grader = (lambda request: DEFAULT_ANSWER), (lambda request: grade(CRITERIA))
    s = Service(slack_api, model_api, start_bot())
    channel = with_rubric(s, "CF10")
    endless = shared_stream_pdf(pages=50, text_bytes=3_000_000, shown=b"")
    assert len(endless) < MAX_FILE_BYTES
    hostile = s.slack.add_file("endless.pdf", endless, "application/pdf")

    ts = mention_with_files(s, "read the endless file", channel, [hostile])
    (final,) = s.wait_finals(channel, ts, 1, timeout=RUN_TIMEOUT + DEADLINE_SECONDS)
    s.mention("and now just answer", channel, thread_ts=ts)
    s.wait_finals(channel, ts, 2)

    assert DEFAULT_ANSWER in final.all_text
    (line,) = [line for line in final.all_text.splitlines() if "Not read" in line]
    assert f"endless.pdf*: a PDF that takes more than {DEADLINE_SECONDS:g} seconds to read" in line


def _memory_kib(pid: int, field: str) -> int:
    """A field of the process's /proc status in KiB: VmRSS (now), VmHWM (its peak so far)."""
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith(f"{field}:")))
