"""The committed site/ is exactly what building the built-in fixtures gives today."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, project_policies, project_sensitivity
from sandbox_replay.report.build import BuildConfig, build_site

REFRESH = "run `make site` and commit site/"


def quiet(message: str) -> None:
    """Swallow progress lines in tests."""


def _tree(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_committed_site_matches_a_fresh_build(tmp_path: Path) -> None:
    committed = REPO / "site"
    assert (committed / "index.html").is_file(), f"site/ is missing: {REFRESH}"
    fresh = tmp_path / "site"
    # Paths on the pages are relative to the working directory: build as `make site` does,
    # with the options pyproject.toml sets.
    assert project_sensitivity()
    config = BuildConfig(
        (REPO / "fixtures",),
        fresh,
        cwd=REPO,
        progress=quiet,
        policies=project_policies(),
        sensitivity=project_sensitivity(),
    )
    build_site(config)
    want, have = _tree(fresh), _tree(committed)
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    stale = sorted(name for name in set(want) & set(have) if want[name] != have[name])
    assert not (missing or extra or stale), (
        f"site/ is out of date ({len(missing)} missing, {len(extra)} extra, "
        f"{len(stale)} differing: {(missing + extra + stale)[:5]}); {REFRESH}"
    )
