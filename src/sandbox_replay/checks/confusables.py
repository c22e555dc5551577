"""Text that looks like something else: invisible characters, and ids that look alike.

``visible`` shows as a ``<U+XXXX>`` mark each character that draws nothing or other than
what is stored (``one_line`` also folds line breaks); the pages, exports and command line
show input text through them (``exports.text``). They are every control (Cc) but tab,
line feed and carriage return; every format character (Cf: zero-width, joiners, bidi
controls, the byte-order mark, tags); the line and paragraph separators; every other
``Default_Ignorable_Code_Point``; surrogates and U+FFFE, U+FFFF. ``tests/hostile/test_text.py``
checks the class against ``unicodedata``; none of them is printable ASCII.

Request ids, and rollback ids, are compared within their kind by their UTS #39 skeleton
(section 4: NFD, each code point mapped through Unicode 15.0's ``confusables.txt``, shipped
beside this module, NFD again; ``tests/test_confusables_golden.py`` holds ICU 72's answers)
of the id less what ``visible`` marks (UTS #39 drops default-ignorables since Unicode 15.1).
Each id that looks like an earlier one of its kind is a finding on its first row, naming
both ids and their characters outside ASCII. Replay ids are not compared: nothing is
joined on them. A printable ASCII id is mapped by a table of each character's skeleton:
ASCII is its own normal form.

``id_mark`` is how every page and export prints an id a reader could take for another:
one not printable ASCII, or one of ``look_alike_ids`` (the ids whose skeleton another id
of their kind shares).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Collection, Sequence
from importlib import resources

from sandbox_replay.checks import actions, rollbacks
from sandbox_replay.checks.base import LayerResult
from sandbox_replay.load.run import RunInputs
from sandbox_replay.model import codes

# Non-ASCII characters named in a finding's message, at most.
MAX_NAMED = 4

_HIDDEN = re.compile(
    "["
    # Controls: C0 but tab, line feed and carriage return; DEL and C1.
    "\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
    # Format characters and default-ignorables below the supplementary planes.
    "\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufffb"
    # Surrogates and the XML-invalid non-characters.
    "\ud800-\udfff\ufffe\uffff"
    # Supplementary format characters and default-ignorables: Kaithi number signs,
    # Egyptian hieroglyph format controls, shorthand format controls, musical symbol
    # formatting, and the tag and variation-selector supplement block.
    "\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
    "]"
)
_BREAKS = re.compile("\r\n|[\r\n\t\u2028\u2029\x85]")


def visible(text: str) -> str:
    """Return ``text`` with invisible, format and control characters shown as ``<U+XXXX>``.

    Tab, line feed and carriage return are kept.
    """
    if text.isascii() and text.isprintable():
        return text
    return _HIDDEN.sub(lambda m: f"<U+{ord(m.group()):04X}>", text)


def one_line(text: str) -> str:
    """Return ``visible(text)`` folded onto one line (each line break becomes a space)."""
    return visible(_BREAKS.sub(" ", text))


def without_hidden(text: str) -> str:
    """Return ``text`` less every character ``visible`` would mark, and tabs and line breaks."""
    return _BREAKS.sub("", _HIDDEN.sub("", text))


@functools.cache
def _prototypes() -> dict[int, str]:
    """Read ``confusables.txt``: the prototype each confusable code point maps to."""
    table: dict[int, str] = {}
    text = resources.files("sandbox_replay.checks").joinpath("confusables.txt").read_text("utf-8")
    for line in text.splitlines():
        if not line.startswith("#"):
            source, target, _ = line.split(";")
            table[int(source, 16)] = "".join(chr(int(code, 16)) for code in target.split())
    return table


def standard_skeleton(text: str) -> str:
    """Return the UTS #39 skeleton of ``text``: NFD, each code point mapped, NFD again."""
    mapped = unicodedata.normalize("NFD", text).translate(_prototypes())
    return unicodedata.normalize("NFD", mapped)


@functools.cache
def _ascii_skeletons() -> dict[int, str]:
    """Return the skeleton of each printable ASCII character that is not its own."""
    shown = {code: standard_skeleton(chr(code)) for code in range(0x20, 0x7F)}
    return {code: text for code, text in shown.items() if text != chr(code)}


def skeleton(text: str) -> str:
    """Return the UTS #39 skeleton of ``text`` less the characters that draw nothing."""
    if text.isascii() and text.isprintable():
        return text.translate(_ascii_skeletons())
    return standard_skeleton(without_hidden(text))


def skeletons(ids: Sequence[str]) -> list[str]:
    """Return the skeleton of each id, in order."""
    together = "".join(ids)
    if ids and together.isascii() and together.isprintable():
        # No printable ASCII id holds a line break: one translation of them all.
        return "\n".join(ids).translate(_ascii_skeletons()).split("\n")
    return list(map(skeleton, ids))


def look_alike(ids: Sequence[str]) -> dict[str, list[str]]:
    """Return, by skeleton, each group of two or more ids with that skeleton, in order."""
    keys = skeletons(ids)
    if len(set(keys)) == len(ids):  # nearly every run: no two ids look alike
        return {}
    groups: dict[str, list[str]] = {}
    for key, given in zip(keys, ids, strict=True):
        groups.setdefault(key, []).append(given)
    return {key: group for key, group in groups.items() if len(group) > 1}


def look_alike_ids(*kinds: Sequence[str]) -> frozenset[str]:
    """Return the ids that share their skeleton with another id of their kind."""
    return frozenset(i for ids in kinds for group in look_alike(ids).values() for i in group)


def escaped(text: str) -> str:
    """Return ``text`` with every character outside printable ASCII shown as ``<U+XXXX>``."""
    if text.isascii() and text.isprintable():
        return text
    return "".join(c if " " <= c <= "~" else f"<U+{ord(c):04X}>" for c in text)


def id_mark(value: str, look_alikes: Collection[str]) -> str:
    """Return the mark printed beside id ``value``: "" for a printable ASCII id that no
    other id looks like, else what it is and, outside ASCII, its ``escaped`` form."""
    plain = value.isascii() and value.isprintable()
    if value not in look_alikes:
        return "" if plain else f"⚠ non-ASCII id: {escaped(value)}"
    return "⚠ has look-alike ids" if plain else f"⚠ look-alike id: {escaped(value)}"


def _outside_ascii(*ids: str) -> str:
    """Name the characters outside ASCII in ``ids``: what a reader's eye does not see."""
    found = list(dict.fromkeys(char for text in ids for char in text if not char.isascii()))
    named = [f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in found[:MAX_NAMED]]
    more = f" and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
    return f"; outside ASCII: {', '.join(named)}{more}" if named else ""


def check(result: LayerResult, run: RunInputs) -> LayerResult:
    """Add to the action layer's ``result`` a finding for each id that looks like an earlier one."""
    if not result.ran:
        return result
    kinds = (
        ("request", "action_request", actions.FLOOR, run.requests),
        ("rollback", "rollback_receipt", rollbacks.FLOOR, run.rollbacks),
    )
    for noun, kind, floor, table in kinds:
        first_rows = table.by_key
        for shared, (first, *others) in look_alike(list(first_rows)).items():
            for other in others:
                result.add_for_row(
                    codes.ACTION_ID_CONFUSABLE,
                    f"{noun} id {one_line(other)} looks like {noun} id {one_line(first)} "
                    f"(both read as {one_line(shared)}){_outside_ascii(other, first)}",
                    floor,
                    table.file,
                    first_rows[other],
                    other,
                    kind,
                )
    return result
