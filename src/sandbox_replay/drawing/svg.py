"""Text and number helpers shared by the site's inline-SVG drawings.

Any string may come from an input file: ``escape`` cleans it (``clean_text``) and
XML-escapes it. ``num`` prints coordinates in one fixed format.
"""

from __future__ import annotations

import html
import re
import unicodedata

# XML 1.0 forbids C0 controls other than tab, LF and CR, lone surrogates and U+FFFE/U+FFFF.
# C1 controls are legal but invisible, and bidi embeddings, overrides and isolates can make
# a label display as something it is not (a trojan-source trick); all become U+FFFD so a
# reader sees that something was there.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)
_SPACE = re.compile(r"\s+")
_ID_PREFIX = re.compile(r"[a-z][a-z0-9_-]{0,39}")

ELLIPSIS = "…"


def clean_text(value: str) -> str:
    """Return the text with unsafe characters replaced and runs of whitespace folded to one space."""
    return _SPACE.sub(" ", _UNSAFE.sub("\ufffd", value)).strip()


def escape(value: str) -> str:
    """Clean the text and escape it for XML element content or a quoted attribute value."""
    return html.escape(clean_text(value), quote=True)


def num(value: float) -> str:
    """Format a coordinate with one decimal place, dropping a trailing ``.0``."""
    text = f"{value:.1f}"
    if text == "-0.0":
        return "0"
    return text[:-2] if text.endswith(".0") else text


def check_id_prefix(id_prefix: str) -> str:
    """Return the prefix if it is a safe start for element ids (lowercase, digits, ``-``, ``_``)."""
    if not _ID_PREFIX.fullmatch(id_prefix):
        raise ValueError(f"id_prefix must match {_ID_PREFIX.pattern}, got {id_prefix!r}")
    return id_prefix


def text_width(text: str, font_size: float) -> float:
    """Estimate, generously, the rendered width of a line of sans-serif text (no font metrics)."""
    units = 0.0
    for char in text:
        if unicodedata.combining(char):
            continue
        if unicodedata.east_asian_width(char) in ("W", "F"):
            units += 1.0
        elif char in "il.,:;'|!" or char == " ":
            units += 0.34
        elif char.isupper() or char in "mwMW@%":
            units += 0.72
        elif char.isdigit():
            # Digits are tabular and wide in common sans faces (DejaVu Sans: 0.64 em).
            units += 0.64
        else:
            units += 0.58
    return units * font_size


def fit_text(text: str, font_size: float, max_width: float) -> str:
    """Return the text, cut with an ellipsis when it would be wider than ``max_width``."""
    if text_width(text, font_size) <= max_width:
        return text
    cut = text
    while cut and text_width(cut + ELLIPSIS, font_size) > max_width:
        cut = cut[:-1]
    return cut.rstrip() + ELLIPSIS


def wrap_text(
    text: str,
    font_size: float,
    max_width: float,
    max_lines: int,
    *,
    widest: float | None = None,
) -> list[str]:
    """Break the text into at most ``max_lines`` lines at spaces, cutting the last if needed.

    With ``widest``, a one-word line may run past ``max_width`` up to ``widest`` uncut.
    """
    lines: list[str] = []
    current = ""
    for word in text.split(" "):
        candidate = f"{current} {word}" if current else word
        if not current or text_width(candidate, font_size) <= max_width:
            current = candidate
            continue
        lines.append(current)
        current = word
    lines.append(current)
    if len(lines) > max_lines:
        lines = [*lines[: max_lines - 1], " ".join(lines[max_lines - 1 :])]
    return [fit_text(line, font_size, widest or max_width) for line in lines]
