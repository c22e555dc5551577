"""Templates ship as package data, and every package is listed for non-editable installs."""

from __future__ import annotations

import tomllib
from importlib import resources

from conftest import REPO
from sandbox_replay.report.render import ASSETS, Renderer


def test_every_package_is_listed_in_pyproject() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"])
    src = REPO / "src"
    found = {
        init.parent.relative_to(src).as_posix().replace("/", ".")
        for init in src.glob("sandbox_replay/**/__init__.py")
    }
    missing = sorted(found - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    assert "sandbox_replay.templates" in listed


def test_templates_and_assets_load_as_package_data() -> None:
    root = resources.files("sandbox_replay.templates")
    for name in ("base.html", "index.html", "run.html", "codes.html"):
        assert (root / name).is_file(), name
    renderer = Renderer()
    for asset in ASSETS:
        assert renderer.asset(asset)
