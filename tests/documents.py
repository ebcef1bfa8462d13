"""Small real documents for tests: a PDF written by matplotlib's PDF backend, one page per text."""

from __future__ import annotations

import io

from matplotlib import rc_context
from matplotlib.backends.backend_pdf import PdfPages
from matplotlib.figure import Figure
from pypdf import PdfWriter
from pypdf.generic import DictionaryObject, NameObject, StreamObject


def pdf_bytes(*pages: str) -> bytes:
    """A PDF with one page per text, its text extractable (TrueType fonts, not Type 3)."""
    buffer = io.BytesIO()
    with rc_context({"pdf.fonttype": 42}), PdfPages(buffer) as pdf:
        for text in pages:
            figure = Figure(figsize=(6, 2))
            figure.text(0.05, 0.5, text)
            pdf.savefig(figure)
    return buffer.getvalue()


def shared_stream_pdf(
    pages: int, text_bytes: int, shown: bytes = b"All work and no play makes a dull bot."
) -> bytes:
    """A hostile PDF: `pages` pages that all show one Flate-compressed content stream of about
    `text_bytes`, a line drawing `shown` again and again (highly repetitive, so the file stays small
    however large the stream). With `shown` empty the stream draws no text: each page's whole stream
    is parsed for nothing, and no cap on the text read stops it."""
    writer = PdfWriter()
    font = writer._add_object(
        DictionaryObject(
            {
                NameObject("/Type"): NameObject("/Font"),
                NameObject("/Subtype"): NameObject("/Type1"),
                NameObject("/BaseFont"): NameObject("/Helvetica"),
            }
        )
    )
    line = b"BT /F1 12 Tf 10 10 Td (" + shown + b") Tj ET\n"
    content = StreamObject()
    content.set_data(line * (text_bytes // len(line) + 1))
    content = content.flate_encode(level=9)
    shared = writer._add_object(content)
    resources = DictionaryObject({NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
    for _ in range(pages):
        page = writer.add_blank_page(width=200, height=200)
        page[NameObject("/Contents")] = shared
        page[NameObject("/Resources")] = resources
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()
