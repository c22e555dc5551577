"""The docs hold: docs/commands.md is the commands' current --help, and no link is broken.

Links are checked in README.md and every docs/*.md page: a relative link must name a file
of the repository, and a ``#anchor`` a heading of the page it points at (GitHub's slugs).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from conftest import REPO

DOCS = REPO / "docs"
PAGES = [REPO / "README.md", *sorted(DOCS.glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.DOTALL | re.MULTILINE)


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("make_commands", DOCS / "make_commands.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def slug(heading: str) -> str:
    """Return GitHub's anchor for a Markdown heading's text."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text("utf-8"))
    return {slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, flags=re.MULTILINE)}


def links(page: Path) -> list[str]:
    return LINK.findall(FENCE.sub("", page.read_text("utf-8")))


def test_the_commands_page_is_the_current_help() -> None:
    page = DOCS / "commands.md"
    assert page.read_text("utf-8") == _generator().render(), (
        "docs/commands.md differs from the commands' --help: run python docs/make_commands.py"
    )


def test_the_commands_page_covers_every_command() -> None:
    text = (DOCS / "commands.md").read_text("utf-8")
    for command in (
        "run",
        "run-sandbox-bundle",
        "build",
        "verify",
        "diff",
        "pack",
        "codes",
        "schema",
        "import inspect",
    ):
        assert f"## `sandbox-replay {command}`\n" in text, command


def resolves(page: Path, target: str) -> bool:
    """Tell whether a link's file exists in the repository and its anchor is a heading."""
    path, _, anchor = target.partition("#")
    file = (page.parent / path).resolve() if path else page
    if not file.exists() or REPO not in file.parents:
        return False
    return not anchor or file.suffix != ".md" or anchor in anchors(file)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_relative_link_resolves(page: Path) -> None:
    relative = [t for t in links(page) if not re.match(r"[a-z]+:", t)]  # not https: or mailto:
    broken = [t for t in relative if not resolves(page, t)]
    assert broken == [], f"{page.name}: links to nothing: {broken}"


def test_the_link_check_sees_links() -> None:
    assert "docs/commands.md" in links(REPO / "README.md")
    assert not resolves(REPO / "README.md", "docs/no-such-page.md")
    assert not resolves(REPO / "README.md", "docs/commands.md#no-such-heading")
    assert resolves(REPO / "README.md", "docs/commands.md#sandbox-replay-build")
    assert slug("Use in CI: `build --fail-on`") == "use-in-ci-build---fail-on"


def test_the_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text("utf-8").count("\n")
    assert lines <= 300, f"README.md is {lines} lines; move detail to docs/"


def test_the_quickstart_is_two_make_targets() -> None:
    readme = (REPO / "README.md").read_text("utf-8")
    quickstart = readme.split("## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    [block] = re.findall(r"^```sh\n(.*?)^```$", quickstart, flags=re.DOTALL | re.MULTILINE)
    commands = [line.split("#", 1)[0].split() for line in block.splitlines()]
    assert commands == [["make", "run"], ["make", "test"]]
    makefile = (REPO / "Makefile").read_text("utf-8")
    assert re.search(r"^run:", makefile, re.MULTILINE) and re.search(
        r"^test:", makefile, re.MULTILINE
    )


# A path cited in backticks, from the repository's root or the package's (``load/run.py``).
CITED = re.compile(
    r"`((?:(?:docs|src|tests|fixtures|schemas|templates|benchmarks|model|load|checks|records"
    r"|importers|drawing|exports|report|cli)/)[\w./-]*\w)`"
)
# performance-history.md cites paths as they were in each round.
CURRENT = [p for p in PAGES if p.name != "performance-history.md"]


@pytest.mark.parametrize("page", CURRENT, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_cited_path_exists(page: Path) -> None:
    package = REPO / "src" / "sandbox_replay"
    cited = set(CITED.findall(FENCE.sub("", page.read_text("utf-8"))))
    missing = sorted(c for c in cited if not (REPO / c).exists() and not (package / c).exists())
    assert missing == [], f"{page.name} cites paths the repository does not hold: {missing}"
