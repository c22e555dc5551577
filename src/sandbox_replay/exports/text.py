"""Make input-derived text inert before any export embeds it.

Input values reach the exports through finding messages, subjects and names. Whatever the
output format escapes by itself, two kinds of character stay harmful everywhere: control
characters (invalid in XML 1.0, and able to rewrite a terminal line) and the Unicode
bidirectional controls (which make a CI log or a review page display text in an order
other than the one stored). Both are shown as visible ``<U+XXXX>`` marks instead.
"""

from __future__ import annotations

import re

# C0 controls except tab/newline/carriage return, DEL and C1 controls, the bidi embedding,
# override and isolate controls, the directional marks, and the XML-invalid non-characters.
_HIDDEN = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\ufffe\uffff\ud800-\udfff]"
)
_BREAKS = re.compile("\r\n|[\r\n\t\u2028\u2029\x85]")


def visible(text: str) -> str:
    """Return ``text`` with control and bidi characters shown as ``<U+XXXX>``; keep line breaks."""
    return _HIDDEN.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def one_line(text: str) -> str:
    """Return ``visible(text)`` folded onto one line (each line break becomes a space)."""
    return visible(_BREAKS.sub(" ", text))
