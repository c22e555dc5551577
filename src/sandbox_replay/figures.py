"""How the tool writes a count for people: one format everywhere, ``1,666``, never ``1666``.

Pages, drawings, the gap headline and the human text of the exports all write counts
through ``count`` (and ``plural``), so a figure reads the same wherever it is shown.
Machine fields (JSON numbers, SARIF and JUnit attributes, sort keys, anchors, file:line
locations) keep plain digits and never pass through here.
"""

from __future__ import annotations


def count(value: int) -> str:
    """Return ``value`` with a comma between each group of three digits: ``60,000``."""
    return f"{value:,}"


def plural(value: int, one: str, many: str | None = None) -> str:
    """Return the count and the noun that agrees with it: ``1 hit``, ``1,666 findings``."""
    return f"{count(value)} {one if value == 1 else (many or one + 's')}"
