"""Give every finding a stable identity, so builds can be compared finding by finding.

A fingerprint is the sha256 (hex) of the finding's code, layer, input file (relative to
the run folder, ``""`` for none) and subject id, each UTF-8 and followed by a NUL byte,
then ``:<n>`` for the n-th finding of the run with that hash in record order. Wording,
line and the run's folder are left out, so they may change. The SARIF export carries it
as ``partialFingerprints["sandboxReplay/finding/v1"]``; ``tests/test_fingerprints.py``
pins those of the fixtures.
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
