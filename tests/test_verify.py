"""``verify``: a fresh site re-derives from its inputs; each kind of tampering is named."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import FIRST_WAVE, REPO, SCENARIOS, edit_json
from sandbox_replay.cli import app
from sandbox_replay.report.build import BuildConfig, build_site
from sandbox_replay.report.recorded_inputs import under
from sandbox_replay.report.verify import VerifyConfig, VerifyError, VerifyReport, verify_site

RUN = "first_wave"
PAGE = f"runs/{RUN}/index.html"
RESULT = f"runs/{RUN}/result.json"


def build(root: Path, *, epoch: int | None = None, single: bool = False) -> Path:
    site = root / "site"
    build_site(
        BuildConfig(
            (root / "runs",),
            site,
            source_date_epoch=epoch,
            cwd=root,
            progress=lambda _: None,
            jobs=1,
            single_file=single,
        )
    )
    return site


def check(site: Path, root: Path) -> VerifyReport:
    return verify_site(VerifyConfig(site, root, progress=lambda _: None, jobs=1))


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding two runs' inputs under runs/ and the site built from them."""
    root = tmp_path_factory.mktemp("verify")
    shutil.copytree(FIRST_WAVE, root / "runs" / RUN)
    shutil.copytree(SCENARIOS / "missing_verdict_row", root / "runs" / "missing_verdict_row")
    build(root)
    return root


@pytest.fixture
def root(built: Path, tmp_path: Path) -> Path:
    """A copy of the built inputs and site, free to tamper with."""
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    return copy


def test_a_fresh_build_verifies(root: Path) -> None:
    report = check(root / "site", root)
    assert report.ok, report.differences
    assert report.runs == ("first_wave", "missing_verdict_row")
    assert report.files_checked == len([p for p in (root / "site").rglob("*") if p.is_file()])


def test_the_committed_site_verifies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    report = verify_site(VerifyConfig(Path("site"), progress=lambda _: None))
    assert report.ok, report.differences


def test_a_build_with_a_build_time_and_single_files_verifies(root: Path) -> None:
    site = build(root, epoch=1_700_000_000, single=True)
    assert b"2023-11-14T22:13:20Z" in (site / PAGE).read_bytes()
    assert check(site, root).ok
    single = site / "single" / f"{RUN}.html"
    single.write_bytes(single.read_bytes().replace(b"<main", b"<main hidden", 1))
    assert check(site, root).differences == (
        f"page no longer follows from its inputs: single/{RUN}.html",
    )


def _number_changed(site: Path) -> None:
    page = site / PAGE
    data = page.read_bytes()
    changed = re.sub(rb"\xe2\x9c\x93 6 requests", "✓ 7 requests".encode(), data, count=1)
    assert changed != data
    page.write_bytes(changed)


def _result_edited(site: Path) -> None:
    path = site / RESULT
    path.write_bytes(path.read_bytes().replace(b'"pass"', b'"blocked"', 1))


def _digest_edited(site: Path) -> None:
    path = site / "manifest.json"
    manifest = json.loads(path.read_bytes())
    entry = next(run for run in manifest["runs"] if run["name"] == RUN)
    entry["result_sha256"] = "sha256:" + "0" * 64
    path.write_text(json.dumps(manifest, indent=2) + "\n")


TAMPERING: dict[str, tuple[Callable[[Path], None], list[str]]] = {
    "page edited": (
        _number_changed,
        [f"page no longer follows from its inputs: {PAGE}"],
    ),
    "result record edited": (
        _result_edited,
        [f"result record differs from the replay: {RESULT}"],
    ),
    "manifest digest edited": (
        _digest_edited,
        [
            f"manifest result digest differs from the replay: {RUN} ({RESULT})",
            "page no longer follows from its inputs: manifest.json",
        ],
    ),
    "page deleted": (
        lambda site: (site / PAGE).unlink(),
        [f"page missing from the site: {PAGE}"],
    ),
    "extra file": (
        lambda site: (site / "runs" / "extra.html").write_text("<p>extra</p>\n"),
        ["file not produced by a rebuild: runs/extra.html"],
    ),
}


@pytest.mark.parametrize("kind", sorted(TAMPERING))
def test_tampering_with_the_site_is_named(root: Path, kind: str) -> None:
    tamper, expected = TAMPERING[kind]
    tamper(root / "site")
    report = check(root / "site", root)
    assert not report.ok
    assert list(report.differences) == expected


def test_an_input_edited_after_the_build_is_named(root: Path) -> None:
    with edit_json(root / "runs" / RUN / "policy_verdicts.json") as data:
        rows = next(v for v in data.values() if isinstance(v, list))
        rows[0]["verdict"] = "allow" if rows[0].get("verdict") != "allow" else "block"
    differences = check(root / "site", root).differences
    assert (
        differences[0] == f"input changed since the site was built: runs/{RUN}/policy_verdicts.json"
    )
    # The rebuild shows what the change reaches: the record and the run page at least.
    assert f"result record differs from the replay: {RESULT}" in differences
    assert f"page no longer follows from its inputs: {PAGE}" in differences


def test_differences_come_in_a_stable_order(root: Path) -> None:
    _number_changed(root / "site")
    _result_edited(root / "site")
    (root / "site" / "zz.txt").write_text("x")
    first = check(root / "site", root).differences
    assert first == check(root / "site", root).differences
    assert first == (
        f"result record differs from the replay: {RESULT}",
        f"page no longer follows from its inputs: {PAGE}",
        "file not produced by a rebuild: zz.txt",
    )


def test_inputs_not_found_fail_closed(root: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    differences = check(root / "site", elsewhere).differences
    assert differences[0] == f"inputs not found: runs/{RUN} (run {RUN})"
    assert differences[-1].startswith("site not rebuilt:")


def test_a_missing_input_file_is_named(root: Path) -> None:
    (root / "runs" / RUN / "cold_replay.json").unlink()
    differences = check(root / "site", root).differences
    assert differences[0] == f"input missing since the site was built: runs/{RUN}/cold_replay.json"


def test_a_manifest_naming_an_input_outside_its_run_is_refused(root: Path) -> None:
    with edit_json(root / "site" / "manifest.json") as manifest:
        manifest["runs"][0]["input_digests"]["../../secret"] = "sha256:" + "0" * 64
    differences = check(root / "site", root).differences
    assert any(d.startswith("manifest names an input outside its run folder:") for d in differences)


@pytest.mark.parametrize(
    "content",
    [
        None,
        b"not json",
        b"[]",
        b'{"schema_version": "other"}',
        b'{"schema_version": "sandbox-replay.site/1", "runs": [{"name": 1}]}',
    ],
)
def test_a_missing_or_invalid_manifest_is_refused(root: Path, content: bytes | None) -> None:
    path = root / "site" / "manifest.json"
    if content is None:
        path.unlink()
    else:
        path.write_bytes(content)
    with pytest.raises(VerifyError, match="manifest"):
        check(root / "site", root)


def test_cli_exit_codes(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(root)
    runner = CliRunner()
    passed = runner.invoke(app, ["verify", "site"])
    assert passed.exit_code == 0, passed.output
    assert passed.stdout == ""
    _number_changed(root / "site")
    failed = runner.invoke(app, ["verify", "site"])
    assert failed.exit_code == 1
    assert failed.stdout == f"page no longer follows from its inputs: {PAGE}\n"
    assert runner.invoke(app, ["verify", "no-such-site"]).exit_code == 2
    (root / "site" / "manifest.json").unlink()
    assert runner.invoke(app, ["verify", "site"]).exit_code == 1


def test_cli_inputs_option(root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    assert runner.invoke(app, ["verify", str(root / "site")]).exit_code == 1
    result = runner.invoke(app, ["verify", str(root / "site"), "--inputs", str(root)])
    assert result.exit_code == 0, result.output


def test_manifest_text_is_shown_on_one_visible_line(root: Path) -> None:
    with edit_json(root / "site" / "manifest.json") as manifest:
        manifest["runs"][0]["source_path"] = "runs/\x1b[31mred\nline"
    seen: list[str] = []
    report = verify_site(VerifyConfig(root / "site", root, progress=seen.append, jobs=1))
    assert not report.ok
    for line in [*report.differences, *seen]:
        assert "\x1b" not in line and "\n" not in line
    assert report.differences[0] == ("inputs not found: runs/<U+001B>[31mred line (run first_wave)")


def _swap_before_open(monkeypatch: pytest.MonkeyPatch, victim: Path) -> list[Path]:
    """Put a FIFO where ``victim`` is, right before it is opened (once)."""
    real_open = os.open
    swapped: list[Path] = []

    def opening(path: object, flags: int, *args: object) -> int:
        if Path(str(path)).resolve() == victim.resolve() and not swapped:
            victim.unlink()
            os.mkfifo(victim)
            swapped.append(victim)
        return real_open(path, flags, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "open", opening)
    return swapped


def test_a_page_swapped_for_a_fifo_while_verified_fails_without_blocking(
    root: Path, monkeypatch: pytest.MonkeyPatch, no_hang: None
) -> None:
    swapped = _swap_before_open(monkeypatch, root / "site" / PAGE)
    differences = check(root / "site", root).differences
    assert swapped
    assert differences == (f"page no longer follows from its inputs: {PAGE}",)


def test_an_input_swapped_for_a_fifo_while_verified_fails_without_blocking(
    root: Path, monkeypatch: pytest.MonkeyPatch, no_hang: None
) -> None:
    victim = root / "runs" / RUN / "cold_replay.json"
    swapped = _swap_before_open(monkeypatch, victim)
    report = verify_site(VerifyConfig(root / "site", root, progress=lambda _: None, jobs=1))
    assert swapped
    assert report.differences[0] == (
        f"input unreadable since the site was built: runs/{RUN}/cold_replay.json"
    )


def test_an_input_symlinked_inside_its_run_folder_verifies(tmp_path: Path) -> None:
    root = tmp_path / "linked"
    folder = root / "runs" / RUN
    shutil.copytree(FIRST_WAVE, folder)
    (folder / "policy_verdicts.json").rename(folder / "verdicts_copy.json")
    (folder / "policy_verdicts.json").symlink_to("verdicts_copy.json")
    build(root)
    report = check(root / "site", root)
    assert report.ok, report.differences


def test_a_recorded_path_is_opened_only_inside_the_inputs_root(tmp_path: Path) -> None:
    root = tmp_path / "inputs"
    (root / "runs").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (root / "runs" / "escape").symlink_to(tmp_path / "outside")
    assert under(root, "runs") == root / "runs"
    for recorded in ("/etc", "../outside", "runs/../../outside", "runs\\x", "runs/escape"):
        assert under(root, recorded) is None, recorded
