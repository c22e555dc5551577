"""Text that looks like something else: invisible characters, and ids that look alike.

Invisible characters. Some characters draw nothing, or draw something other than what is
stored: control characters (invalid in XML 1.0, and able to rewrite a terminal line),
the bidirectional controls (which make a page or a CI log show text in an order other
than the one stored), and the invisible ones (a zero-width space, a byte-order mark, a
tag character or a variation selector makes two ids that look the same differ).
``visible`` shows each as a ``<U+XXXX>`` mark, ``one_line`` also folds line breaks into
spaces; the pages, the exports and the command line show input text through them
(``exports.text``), and the findings below name ids through them. They are:

- every control character (Unicode category Cc) except tab, line feed and carriage
  return, which ``visible`` keeps and ``one_line`` folds;
- every format character (Cf): soft hyphen, zero-width space, joiners and marks, bidi
  embeddings, overrides and isolates, word joiner and invisible operators, the
  byte-order mark, interlinear annotation marks, tag characters, Arabic and Egyptian
  prepended or format signs;
- the line and paragraph separators (Zl, Zp);
- every other default-ignorable code point (Unicode's ``Default_Ignorable_Code_Point``:
  the combining grapheme joiner, Hangul fillers, Khmer inherent vowels, Mongolian and
  other variation selectors, and the reserved ranges set aside for more of them);
- surrogates and the non-characters U+FFFE and U+FFFF (invalid in XML).

``tests/hostile/test_text.py`` checks the class against ``unicodedata``. None of these
characters is printable ASCII, so text that is (``str.isascii`` and ``str.isprintable``)
needs no pass.

Ids that look alike. Request ids, and rollback ids (which side-effect receipts name), are
compared within their kind by their confusable skeleton (Unicode Technical Standard #39,
section 4): two strings with one skeleton are drawn alike, as ``req_secret_env_read`` and
``req_secret_env_rеad`` with a Cyrillic ``е`` are. The skeleton is the standard's (NFD,
each code point mapped through Unicode 15.0's ``confusables.txt``, shipped beside this
module, then NFD again; ``tests/test_confusables_golden.py`` checks it against ICU 72's
on the whole table) of the id less the characters ``visible`` marks: they draw nothing,
and UTS #39 removes the default-ignorable ones from a skeleton since Unicode 15.1. Each
id whose skeleton is that of an earlier id of its kind (in row order) is a finding of
the action-requests layer on the id's first row, naming both ids in their visible form
and the characters outside ASCII that either holds. Replay ids are not compared: nothing
is joined on them (a replay is joined by its request id).

Ids of printable ASCII, nearly all of them, are mapped with a table of the skeletons of
the printable ASCII characters: the skeleton maps character by character and leaves
ASCII's normal form as it is, so that is the id's skeleton.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
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

    Tab, line feed and carriage return are kept. Printable ASCII holds none of them, so
    such text (nearly all of it: ids, refs, codes) is returned without running the pattern.
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
