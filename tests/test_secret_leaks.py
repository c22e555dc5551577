"""A planted secret blocks its run and appears in no byte the tool writes or prints.

Three secrets are planted, each alone in one field or file of a temporary copy of a
built-in run (or of the hostile bundle): the synthetic live-secret sentinel of
``data/forbidden_classes.json``, and an AWS-access-key-shaped and a GitHub-token-shaped
string built here by concatenation (so no credential shape is ever committed). Each copy
is replayed by ``run`` or ``run-sandbox-bundle`` with every export, all of them are built
into one site with every export, and the site is packed. Then every file written (records,
pages, result.json, manifest, SARIF, JUnit, Markdown, the archive's decompressed members,
SHA256SUMS) and everything printed is searched for each secret in plain, JSON-escaped,
HTML-escaped and percent-encoded form, and for its first twelve characters.
"""

from __future__ import annotations

import gzip
import html
import io
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import quote

import pytest

from conftest import EXPORTED_BUNDLE, FIRST_WAVE, REPO
from sandbox_replay.model.codes import FORBIDDEN_MATERIAL_DETECTED
from sandbox_replay.records.build import BUNDLE_RESULT_FILE, RESULT_FILE

HOSTILE_BUNDLE = REPO / "tests" / "data" / "hostile_bundle"
WITHHELD = "Withheld: the forbidden-material scan matched this file"


def _sentinel() -> str:
    table = json.loads(
        (resources.files("sandbox_replay") / "data" / "forbidden_classes.json").read_text("utf-8")
    )
    entry = next(c for c in table["classes"] if c["class_id"] == "synthetic_live_secret_sentinel")
    token: str = entry["tokens"][0]
    return token


SENTINEL = _sentinel()
# Shapes of real credentials, assembled at run time so the repository never holds one.
AWS_KEY = "AK" + "IA" + "SRXFAKE" + "QWERTY789"
GITHUB_TOKEN = "gh" + "p_" + "SrxFakeToken" + "0123456789abcdefghijklmn"
SECRETS = {"sentinel": SENTINEL, "aws": AWS_KEY, "github": GITHUB_TOKEN}


def encodings(secret: str) -> set[bytes]:
    """Return the forms a leaked secret could take in a written file."""
    forms = {
        secret,
        json.dumps(secret)[1:-1],
        html.escape(secret, quote=True),
        quote(secret, safe=""),
        secret[:12],
    }
    return {form.encode("utf-8") for form in forms}


# ---------------------------------------------------------------------------------------
# The planted copies


def _replace_once(path: Path, old: str, new: str) -> None:
    text = path.read_text("utf-8")
    assert text.count(old) >= 1, (path.name, old)
    path.write_text(text.replace(old, new, 1), "utf-8")


def _refresh_digests(bundle: Path) -> None:
    """Keep the manifest's digests true, so only the scan can block the run."""
    import hashlib

    manifest_path = bundle / "source_module_manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    for module in manifest["modules"]:
        digest = "sha256:" + hashlib.sha256((bundle / module["path"]).read_bytes()).hexdigest()
        module.update(sha256=digest, source_sha256=digest, target_sha256=digest)
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")


@dataclass(frozen=True)
class Plant:
    """One run copy with one secret in one place, and the input file that must be withheld."""

    name: str
    source: Path
    secret: str
    file: str
    old: str
    new: str  # ``{secret}`` is replaced by the secret
    everywhere: bool = False  # replace in every input file (an id the others join on)

    @property
    def bundle(self) -> bool:
        return (self.source / "bundle_manifest.json").is_file()

    def make(self, root: Path) -> Path:
        folder = root / self.name
        shutil.copytree(self.source, folder)
        planted = self.new.replace("{secret}", self.secret)
        _replace_once(folder / self.file, self.old, planted)
        if self.everywhere:
            for path in sorted(folder.glob("*.json")):
                path.write_text(path.read_text("utf-8").replace(self.old, planted), "utf-8")
        if self.bundle:
            _refresh_digests(folder)
        return folder


DOC = "source_modules/docs/SANDBOX_POLICY_BLOCKED_ACTION_EXECUTED.md"
PLANTS = (
    Plant(
        "bundle_request_ref",
        EXPORTED_BUNDLE,
        SENTINEL,
        "action_requests.json",
        "action:outbound_post/synthetic_collector",
        "action:outbound_post/{secret}",
    ),
    Plant(
        "bundle_decision_reason",
        EXPORTED_BUNDLE,
        AWS_KEY,
        "policy_verdicts.json",
        "reason:no_live_network_from_untrusted_context",
        "reason:{secret}",
    ),
    Plant(
        "bundle_rollback_command",
        EXPORTED_BUNDLE,
        GITHUB_TOKEN,
        "rollback_receipts.json",
        "rollback_command:restore/safe_fixture_edit",
        "rollback_command:{secret}",
    ),
    Plant(
        "bundle_key_name",
        EXPORTED_BUNDLE,
        AWS_KEY,
        "side_effect_receipts.json",
        '"network_diff_ref": "diff:none",',
        '"network_diff_ref": "diff:none", "{secret}": "x",',
    ),
    Plant("bundle_copied_body", EXPORTED_BUNDLE, GITHUB_TOKEN, DOC, "## ", "{secret}\n\n## "),
    Plant(
        "bundle_manifest_id",
        EXPORTED_BUNDLE,
        SENTINEL,
        "bundle_manifest.json",
        '"bundle_id": "bundle:first_wave_containment_export"',
        '"bundle_id": "bundle:{secret}"',
    ),
    Plant(
        "fixture_request_id",
        FIRST_WAVE,
        GITHUB_TOKEN,
        "action_requests.json",
        '"req_network_exfil_attempt"',
        '"{secret}"',
        everywhere=True,
    ),
    Plant(
        "fixture_escaped_ref",
        FIRST_WAVE,
        SENTINEL.replace("_", "\\u005f", 1),
        "action_requests.json",
        "action:environment_read/synthetic_credential_name",
        "action:{secret}",
    ),
    Plant(
        "hostile_decision_reason",
        HOSTILE_BUNDLE,
        SENTINEL,
        "policy_verdicts.json",
        '"decision_reason_ref": "reason:no_live_network',
        '"decision_reason_ref": "reason:{secret}/no_live_network',
    ),
)


# ---------------------------------------------------------------------------------------
# Running everything once


@dataclass(frozen=True)
class Command:
    args: tuple[str, ...]
    returncode: int
    stdout: bytes
    stderr: bytes


@dataclass(frozen=True)
class Outputs:
    root: Path
    folders: dict[str, Path]
    runs: dict[str, Command]
    build: Command
    pack: Command


def _start(*args: str) -> tuple[tuple[str, ...], subprocess.Popen[bytes]]:
    command = (sys.executable, "-c", "from sandbox_replay.cli import main; main()", *args)
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return args, process


def _finish(started: tuple[tuple[str, ...], subprocess.Popen[bytes]]) -> Command:
    args, process = started
    stdout, stderr = process.communicate(timeout=120)
    return Command(args, process.returncode, stdout, stderr)


def _run_args(plant: Plant, folder: Path, out: Path) -> tuple[str, ...]:
    command = "run-sandbox-bundle" if plant.bundle else "run"
    exports = out / "exports"
    return (
        command,
        "--input",
        str(folder),
        "--out",
        str(out / "records"),
        "--card",
        "--sarif",
        str(exports / "log.sarif"),
        "--junit",
        str(exports / "junit.xml"),
        "--markdown",
        str(exports / "summary.md"),
    )


@pytest.fixture(scope="module")
def outputs(tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    root = tmp_path_factory.mktemp("secret_leaks")
    inputs = root / "in"
    inputs.mkdir()
    folders = {plant.name: plant.make(inputs) for plant in PLANTS}
    started = {
        plant.name: _start(*_run_args(plant, folders[plant.name], root / "runs" / plant.name))
        for plant in PLANTS
    }
    runs = {name: _finish(process) for name, process in started.items()}
    site = root / "site"
    build = _finish(
        _start(
            "build",
            str(inputs),
            "--out",
            str(site),
            "--sarif",
            str(root / "site_exports" / "log.sarif"),
            "--junit",
            str(root / "site_exports" / "junit.xml"),
            "--markdown",
            str(root / "site_exports" / "summary.md"),
        )
    )
    pack = _finish(_start("pack", str(site), "--out", str(root / "packed" / "site.tar.gz")))
    return Outputs(root, folders, runs, build, pack)


def _written(root: Path) -> list[Path]:
    """Every file the commands wrote (the planted inputs aside)."""
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_relative_to(root / "in"))


def _archive_members(archive: Path) -> dict[str, bytes]:
    members: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(archive.read_bytes()))) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member)
            if handle is not None:
                members[member.name] = handle.read()
    return members


# ---------------------------------------------------------------------------------------
# Tests


def test_every_command_ran(outputs: Outputs) -> None:
    for name, command in outputs.runs.items():
        assert command.returncode == 1, (name, command.stderr[-400:])
    assert outputs.build.returncode == 0, outputs.build.stderr[-400:]
    assert outputs.pack.returncode == 0, outputs.pack.stderr[-400:]
    assert (outputs.root / "packed" / "site.tar.gz").is_file()


@pytest.mark.parametrize("plant", PLANTS, ids=[p.name for p in PLANTS])
def test_the_scan_blocks_each_run(outputs: Outputs, plant: Plant) -> None:
    records = outputs.root / "runs" / plant.name / "records"
    result = json.loads(
        (records / (BUNDLE_RESULT_FILE if plant.bundle else RESULT_FILE)).read_text("utf-8")
    )
    assert result["status"] == "blocked"
    assert FORBIDDEN_MATERIAL_DETECTED in result["error_codes"]
    flagged = {hit["path"] for hit in result["secret_exclusion_scan"]["hits"]}
    assert plant.file in flagged
    page = (outputs.root / "site" / "runs" / plant.name / "index.html").read_text("utf-8")
    assert "status-blocked" in page


def test_no_secret_in_any_written_byte(outputs: Outputs) -> None:
    needles = {name: encodings(secret) for name, secret in SECRETS.items()}
    files = _written(outputs.root)
    assert len(files) > 50, "the commands wrote less than expected"
    blobs = {path.relative_to(outputs.root).as_posix(): path.read_bytes() for path in files}
    for member, data in _archive_members(outputs.root / "packed" / "site.tar.gz").items():
        blobs[f"site.tar.gz:{member}"] = data
    for name, data in blobs.items():
        for secret, forms in needles.items():
            leaked = [form for form in forms if form in data]
            # Never print the form itself: a test log is an output too.
            assert not leaked, f"{name} holds the {secret} secret ({len(leaked)} form(s))"


def test_no_secret_in_anything_printed(outputs: Outputs) -> None:
    commands = [*outputs.runs.values(), outputs.build, outputs.pack]
    for command in commands:
        for stream in (command.stdout, command.stderr):
            for secret, value in SECRETS.items():
                leaked = [form for form in encodings(value) if form in stream]
                assert not leaked, f"{command.args[0]} printed the {secret} secret"


def _slug(path: str) -> str:
    from sandbox_replay.report.highlight import file_slug

    return file_slug(path)


@pytest.mark.parametrize(
    "plant", [p for p in PLANTS if p.file.endswith(".json")], ids=lambda p: p.name
)
def test_a_flagged_file_is_withheld_from_every_page(outputs: Outputs, plant: Plant) -> None:
    site = outputs.root / "site"
    page = (site / "runs" / plant.name / "index.html").read_text("utf-8")
    slug = _slug(plant.file)
    start = page.index(f'id="file-{slug}"')
    section = page[start : page.index("</details>", start)]
    assert WITHHELD in section
    assert "forbidden-material scan" in section
    for other in site.rglob("*.html"):
        text = other.read_text("utf-8")
        if other.parent.name == plant.name:
            assert f'id="{slug}-L1"' not in text, other
    # The files the secret is not in are still shown.
    shown = [f for f in ("sandbox_policy.json", "projection_protocol.json") if f != plant.file]
    for name in shown:
        assert f'id="{_slug(name)}-L1"' in page, name


def test_copied_body_is_never_shown(outputs: Outputs) -> None:
    page = (outputs.root / "site/runs/bundle_copied_body/index.html").read_text("utf-8")
    assert "Bodies are never shown" in page
    body = (outputs.folders["bundle_copied_body"] / DOC).read_text("utf-8")
    sentence = "This is the most direct containment failure a record can show."
    assert sentence in body
    assert sentence not in page
