"""A PDF's reader child under a console script: it runs nothing of the process's main script."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CONSOLE_SCRIPT = """
import io, os, sys
with open(sys.argv[1], "a") as imported:  # each process that runs this file says so
    print(os.getpid(), file=imported)
from bot.cli.main import main  # as the script pip writes for `rubric-bot` does
from bot.material.files import UnreadableFile
from bot.material.pdf import keep_main_out_of_children, pdf_text
from pypdf import PdfWriter
if __name__ == "__main__":
    keep_main_out_of_children()  # what `main` does first
    pdf = PdfWriter()
    pdf.add_blank_page(100, 100)
    data = io.BytesIO()
    pdf.write(data)
    try:
        pdf_text(data.getvalue(), 1000)
    except UnreadableFile:
        pass  # read, and found blank
"""
"""Stands for the ``rubric-bot`` console script, reading a PDF."""


def test_a_pdf_child_does_not_run_the_console_script_before_its_memory_limit(tmp_path: Path):
    """Under the console script, multiprocessing ran the script again in each PDF child (importing
    the whole bot before the child's memory limit applied); the bot's entry point keeps it out."""
    marker = tmp_path / "imported"
    script = tmp_path / "rubric-bot"
    script.write_text(CONSOLE_SCRIPT)
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[3])}
    subprocess.run([sys.executable, str(script), str(marker)], check=True, env=environment, timeout=60)

    assert len(marker.read_text().split()) == 1  # the script ran in its own process only
