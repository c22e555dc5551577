"""How the tool writes a count for people: ``1,666``, never ``1666``, wherever it is shown.

Machine fields (JSON numbers, SARIF and JUnit attributes, anchors, file:line) keep plain digits.
"""

from __future__ import annotations


def count(value: int) -> str:
    """Return ``value`` with a comma between each group of three digits: ``60,000``."""
    return f"{value:,}"


def plural(value: int, one: str, many: str | None = None) -> str:
    """Return the count and the noun that agrees with it: ``1 hit``, ``1,666 findings``."""
    return f"{count(value)} {one if value == 1 else (many or one + 's')}"
