"""A confidence for every verdict, end to end: with RUBRIC_BOT_GRADER_SAMPLES the grader stand-in is
asked several times an iteration, and a criterion its samples split on carries the majority's share
in the thread, in the database and in the export, on SQLite and PostgreSQL."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
from collections.abc import Callable

import pytest

from tests.e2e.conftest import CRITERIA, Service, evaluations
from tests.standins.model_api import ChatRequest, Json, grade

CITES, POLITE = CRITERIA
EXPORT_TIMEOUT = 120.0
"""Bound for the export command (a fresh Python process importing langchain, on a loaded machine)."""


def splitting_grader(cites: list[bool]) -> Callable[[ChatRequest], Json]:
    """Passes "Is polite" every time; on "Cites a source" gives each verdict of `cites` in turn."""
    turns = itertools.cycle(cites)
    lock = threading.Lock()  # the samples of an iteration arrive together

    def script(request: ChatRequest) -> Json:
        with lock:
            cites_ok = next(turns)
        return grade(CRITERIA, failing=[] if cites_ok else [CITES], scored=request.is_scored)

    return script


def export_rows(database: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "bot", "export", "--db", database],
        capture_output=True,
        text=True,
        timeout=EXPORT_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_three_samples_split_two_to_one_carry_confidence_two_thirds(launch, database_url):
    s: Service = launch(RUBRIC_BOT_GRADER_SAMPLES="3")
    s.model.worker = lambda request: "Coffee is fine in moderation (WHO, 2023)."
    s.model.grader = splitting_grader([True, True, False])
    s.set_channel_rubric("C1")
    root = s.mention("Is coffee healthy?", "C1")
    [final] = s.wait_finals("C1", root, 1)

    assert len(s.model.requests("grader")) == 3
    assert "Rubric satisfied" in final.all_text  # the majority passed it: acted on, no revision
    [evaluation] = evaluations(s.thread("C1", root))
    assert f"✅ {CITES} · _2 of 3 samples_" in evaluation.all_text
    assert f"✅ {POLITE} · _" not in evaluation.all_text  # unanimous: nothing to say

    rows = {row["criterion"]: row for row in export_rows(database_url)}
    assert rows[CITES]["grader_verdict"] == "pass"
    assert rows[CITES]["confidence"] == pytest.approx(0.67, abs=0.005)
    assert rows[POLITE]["confidence"] == 1.0
    assert rows[CITES]["samples"] == rows[POLITE]["samples"] == 3
    assert rows[CITES]["escalated"] is False
