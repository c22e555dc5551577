"""Make input-derived text inert before any export, page or terminal line shows it.

``visible`` shows control, bidirectional and invisible characters as ``<U+XXXX>`` marks;
``one_line`` also folds line breaks into spaces. They are defined with the look-alike id
check (``checks.confusables``), which leaves the same characters out of a skeleton.
"""

from __future__ import annotations

from sandbox_replay.checks.confusables import one_line, visible, without_hidden

__all__ = ["one_line", "visible", "without_hidden"]
