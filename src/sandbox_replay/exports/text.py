"""Make input-derived text inert before any export, page or terminal line shows it.

Input values reach the exports through finding messages, subjects and names. Whatever the
output format escapes by itself, some characters stay harmful everywhere because they
draw nothing, or draw something other than what is stored: control characters (invalid
in XML 1.0, and able to rewrite a terminal line), the bidirectional controls (which make
a CI log or a review page display text in an order other than the one stored), and the
invisible ones (a zero-width space, a byte-order mark, a tag character or a variation
selector makes two ids that look the same differ). ``visible`` shows all of them as
``<U+XXXX>`` marks and ``one_line`` also folds line breaks into spaces.

They are defined with the look-alike id check (``layers.confusables``), which names ids
in findings in the same visible form and leaves the same characters out of a skeleton;
the exports, pages and command line take them from here.
"""

from __future__ import annotations

from sandbox_replay.checks.confusables import one_line, visible, without_hidden

__all__ = ["one_line", "visible", "without_hidden"]
