"""Give every finding a stable identity, so builds can be compared finding by finding.

A finding's fingerprint is the sha256 (hex) of what it is about, never of where the tool
happened to print it: its code, its layer, the input file it names (relative to the run
folder, ``""`` when it names none) and its subject id, each UTF-8 encoded and followed by
a NUL byte, then ``:<n>`` for the n-th finding of the run with that hash in the result
record's order (``Finding.sort_key``), so two findings about one subject stay apart.

The message wording, the line number and the run's position or folder are left out on
purpose: a reworded message, a reformatted input or a run folder that moved keeps its
findings' identities. The same strings are carried by the SARIF export as
``partialFingerprints["sandboxReplay/finding/v1"]``. ``tests/test_fingerprints.py`` pins
the fingerprints of the built-in fixtures, so a change of them is a deliberate one.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable

FINGERPRINT_VERSION = "sandboxReplay/finding/v1"


def finding_hash(code: str, layer: str, path: str | None, subject_id: str) -> str:
    """Return the hash of one finding's identity (without its ``:<n>`` occurrence)."""
    digest = hashlib.sha256()
    for part in (code, layer, path or "", subject_id):
        digest.update(part.encode("utf-8", "surrogatepass"))
        digest.update(b"\x00")
    return digest.hexdigest()


def fingerprints(identities: Iterable[tuple[str, str, str | None, str]]) -> list[str]:
    """Return the fingerprint of each (code, layer, path, subject id), in the order given."""
    seen: Counter[str] = Counter()
    found = []
    for code, layer, path, subject_id in identities:
        base = finding_hash(code, layer, path, subject_id)
        seen[base] += 1
        found.append(f"{base}:{seen[base]}")
    return found
