"""Small real documents for tests: a PDF written by matplotlib's PDF backend, one page per text."""

from __future__ import annotations

import io

from matplotlib import rc_context
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure


def pdf_bytes(*pages: str) -> bytes:
    """A PDF with one page per text, its text extractable (TrueType fonts, not Type 3)."""
    buffer = io.BytesIO()
    with rc_context({"pdf.fonttype": 42}), PdfPages(buffer) as pdf:
        for text in pages:
            figure = Figure(figsize=(6, 2))
            figure.text(0.05, 0.5, text)
            pdf.savefig(figure)
    return buffer.getvalue()
