"""What a result record's ``sensitivity`` section says, in words (``checks.sensitivity``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox_replay.figures import count, plural


def seeded_missed(result: Mapping[str, Any]) -> list[str]:
    """Return the ids of the seeded escapes the replay missed (none without ``--sensitivity``)."""
    section = result.get("sensitivity") or {}
    return [e["escape_id"] for e in section.get("escapes", ()) if e["outcome"] == "missed"]


def seeded_caught_text(result: Mapping[str, Any]) -> str | None:
    """Return "N of M seeded escapes caught" (None without ``--sensitivity``)."""
    section = result.get("sensitivity")
    if section is None:
        return None
    caught, applicable = count(section["caught_count"]), count(section["applicable_count"])
    return f"{caught} of {applicable} seeded escapes caught"


def missed_warning(result: Mapping[str, Any]) -> str | None:
    """Return the sentence a passing run's headline starts with when an escape was missed."""
    missed = seeded_missed(result)
    if not missed:
        return None
    these = "that lie" if len(missed) == 1 else "those lies"
    return (
        plural(len(missed), "seeded escape was", "seeded escapes were").capitalize()
        + f" missed ({', '.join(missed)}): this evidence could not have shown {these}, so "
        "the pass proves less than it says."
    )
