"""Make input-derived text inert before any export, page or terminal line shows it.

``visible`` shows control, bidirectional and invisible characters as ``<U+XXXX>`` marks;
``one_line`` also folds line breaks into spaces. They are defined with the look-alike id
check (``checks.confusables``), which leaves the same characters out of a skeleton, as
is ``id_mark``, the mark every printer puts beside an id a reader could take for another.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sandbox_replay.checks.confusables import (
    escaped,
    id_mark,
    look_alike_ids,
    one_line,
    visible,
    without_hidden,
)
from sandbox_replay.model import codes
from sandbox_replay.model.findings import Finding

__all__ = [
    "escaped",
    "id_mark",
    "look_alike_ids",
    "one_line",
    "subject_look_alikes",
    "subject_mark",
    "visible",
    "without_hidden",
]


def _subject_id(subject: object) -> str:
    """Return the id a finding's subject names: a trace span's is its request's."""
    return subject.removeprefix("span:") if isinstance(subject, str) else ""


def subject_mark(subject: object, look_alikes: Collection[str]) -> str:
    """Return the ``id_mark`` of a finding's subject id."""
    return id_mark(_subject_id(subject), look_alikes)


def subject_look_alikes(findings: Iterable[Finding]) -> frozenset[str]:
    """Return, for an export that has only a run's findings, the subject ids to mark as
    look-alikes: those the look-alike check named, and those sharing a skeleton."""
    findings = list(findings)
    named = {f.subject_id for f in findings if f.error_code == codes.ACTION_ID_CONFUSABLE}
    subjects = list(dict.fromkeys(_subject_id(f.subject_id) for f in findings))
    return frozenset(named) | look_alike_ids(subjects)
