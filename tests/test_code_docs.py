"""Every registered finding code has a catalog document of the fixed four-section shape."""

from __future__ import annotations

import json
import re
from importlib import resources

import pytest

from sandbox_replay.model.codes import REGISTRY

DOCS = resources.files("sandbox_replay") / "data" / "codes"
SECTIONS = ["What it checks", "Why it matters", "Example", "Fix"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^(#{1,6}) (.*)$", re.MULTILINE)
CODES = [code.code for code in REGISTRY]


def split_sections(text: str) -> dict[str, str]:
    """Map each `## ` heading outside code fences to the text beneath it."""
    headings = HEADING.findall(FENCE.sub("", text))
    assert headings == [("##", title) for title in SECTIONS], headings
    parts = re.split(r"^## (?:" + "|".join(SECTIONS) + r")\n", text, flags=re.MULTILINE)
    assert parts[0] == "", "text before the first section"
    return dict(zip(SECTIONS, (part.strip() for part in parts[1:]), strict=True))


def test_doc_files_match_the_registry_exactly() -> None:
    stems = {entry.name[: -len(".md")] for entry in DOCS.iterdir() if entry.name.endswith(".md")}
    assert stems == set(CODES)


@pytest.mark.parametrize("code", CODES)
def test_doc_has_the_four_sections_and_a_json_example(code: str) -> None:
    text = REGISTRY[code].doc
    assert text, f"{code}.md is missing or empty"
    assert not re.search(r"^# ", text, re.MULTILINE), "top-level heading"
    sections = split_sections(text)
    assert all(sections.values()), "empty section"
    example = sections["Example"]
    fences = FENCE.findall(example)
    assert [lang for lang, _ in fences] == ["json"], "Example needs exactly one json block"
    assert example.index("```json") > 0, "Example needs a sentence before its block"
    json.loads(fences[0][1])
