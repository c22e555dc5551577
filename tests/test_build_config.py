"""``BuildConfig`` checks its own values as it is made, for the CLI and library callers alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import FIRST_WAVE
from sandbox_replay.report.build import BuildConfig, BuildError


@pytest.mark.parametrize("label", ["", "   ", "a\tb", "x" * 101])
def test_a_label_that_cannot_be_shown_is_refused(tmp_path: Path, label: str) -> None:
    with pytest.raises(BuildError, match="--label must be 1 to 100 printable characters"):
        BuildConfig((FIRST_WAVE,), tmp_path / "site", label=label)


def test_a_missing_templates_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"templates folder .* does not exist"):
        BuildConfig((FIRST_WAVE,), tmp_path / "site", templates=tmp_path / "nope")


def test_good_values_make_a_config(tmp_path: Path) -> None:
    config = BuildConfig((FIRST_WAVE,), tmp_path / "site", templates=tmp_path, label="x" * 100)
    assert config.label == "x" * 100
