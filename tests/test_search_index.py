"""A run's search index: split small, sorted as a browser compares, safe inside a script."""

from __future__ import annotations

import json
import re
from urllib.parse import unquote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sandbox_replay.report.parallel import needles_of
from sandbox_replay.report.search_index import (
    PART_BYTES,
    PART_ENTRIES,
    SearchEntry,
    js_string,
    search_files,
)
from sandbox_replay.report.views.common import (
    content_slug,
    finding_anchors,
    finding_fingerprint,
    request_anchor,
)

_CALL = re.compile(r"SandboxReplaySearch\.(manifest|part)\((.*)\);\n\Z", re.DOTALL)


def _read(data: bytes) -> object:
    """Read one index file back as the browser would: the call's JSON argument(s)."""
    found = _CALL.fullmatch(data.decode("utf-8"))
    assert found, data[:80]
    return json.loads("[" + found.group(2) + "]")


def test_entries_are_split_into_parts_the_manifest_finds() -> None:
    entries = [
        SearchEntry(f"req_{n:07d}", "request", f"join/page-{n // 500 + 1:04d}.html#req-{n}")
        for n in range(3 * PART_ENTRIES + 7)
    ]
    files = dict(search_files(reversed(entries)))
    assert list(files) == ["search/index.js"] + [f"search/part-{n:04d}.js" for n in range(1, 5)]
    (manifest,) = _read(files["search/index.js"])  # type: ignore[misc]
    assert manifest["count"] == len(entries)
    keys = []
    for first, name in manifest["parts"]:
        called_name, part = _read(files[f"search/{name}"])  # type: ignore[misc]
        assert called_name == name
        assert part[0][0].lower() == first
        keys.extend(e[0] for e in part)
    assert keys == sorted(e.key for e in entries)


def test_no_part_outgrows_its_byte_budget() -> None:
    entries = [SearchEntry(f"k{n:05d}" + "x" * 400, "request", "index.html#a") for n in range(9000)]
    files = search_files(entries)
    assert len(files) > 1 + 9000 // PART_ENTRIES
    assert all(len(data) <= PART_BYTES + 4096 for _, data in files)


def test_keys_sort_as_javascript_compares_them() -> None:
    """UTF-16 code units, lower-cased: an astral character sorts before U+FFFF there."""
    keys = ["b", "A", "\U0001f600", "\uffff", "a"]
    files = dict(search_files(SearchEntry(k, "request", "index.html#x") for k in keys))
    _, part = _read(files["search/part-0001.js"])  # type: ignore[misc]
    assert [e[0] for e in part] == ["A", "a", "b", "\U0001f600", "\uffff"]


@pytest.mark.parametrize(
    "value", ["</script><script>alert(1)</script>", "a\u2028b\u2029c", "x&y>z", 'q"\\', "\ud800"]
)
def test_strings_cannot_close_a_script_or_a_line(value: str) -> None:
    files = search_files([SearchEntry(value, "request", "index.html#x", value)])
    for _, data in files:
        text = data.decode("utf-8")
        assert "</script" not in text.lower()
        assert "\u2028" not in text and "\u2029" not in text
    _, part = _read(dict(files)["search/part-0001.js"])  # type: ignore[misc]
    assert part[0][0] == value and part[0][3] == value


@given(st.text())
def test_a_string_literal_reads_back_as_the_string_and_holds_no_markup_or_hidden_text(
    value: str,
) -> None:
    literal = js_string(value)
    assert json.loads(literal) == value
    assert not set("<>&") & set(literal)
    assert all(c.isprintable() for c in literal)
    # Where nothing needs an escape of its own, it is what json.dumps writes.
    plain = json.dumps(value, ensure_ascii=False)
    if plain.isprintable() and plain.isascii() and not set("<>&") & set(plain):
        assert literal == plain


def test_matched_text_is_refused_in_the_form_the_index_writes() -> None:
    secret = 'tok"en<1>\u2028'
    needles = needles_of([secret.encode()])
    written = b"".join(data for _, data in search_files([SearchEntry(secret, "request", "#x")]))
    assert any(needle in written for needle in needles)


@given(st.text())
def test_content_slugs_are_safe_and_reversible(value: str) -> None:
    slug = content_slug(value)
    assert re.fullmatch(r"[A-Za-z0-9_.~-]*", slug)
    # What the page's script does: read ~ as % (a lone surrogate has no UTF-8 to read back).
    if not any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        assert unquote(slug.replace("~", "%"), errors="strict") == value


def test_request_anchors_differ_for_different_ids() -> None:
    ids = ["a b", "a~20b", "a%20b", "a_b", "A_b"]
    assert len({request_anchor(i) for i in ids}) == len(ids)


def test_finding_anchors_come_from_content_not_position() -> None:
    a = {"error_code": "X", "layer": "l", "subject_id": "s", "path": "p.json", "line": 3}
    b = {**a, "line": 4}
    assert finding_anchors([a, b]) == finding_anchors([a, b])
    assert finding_anchors([b, a]) == list(reversed(finding_anchors([a, b])))
    # Two equal findings are told apart by a number.
    assert finding_anchors([a, a]) == [
        f"f-{finding_fingerprint(a)}",
        f"f-{finding_fingerprint(a)}-2",
    ]
