"""Record the sha256 of every output the tool writes, to prove a refactor changed no byte.

Run:  .venv/bin/python benchmarks/output_digests.py record --work DIR --out digests.json
      .venv/bin/python benchmarks/output_digests.py compare before.json after.json

``record`` replays a fixed set of inputs through the command line and hashes every file
each command writes: the result, board, receipt and acceptance records, the card (stdout
of ``--card``), the SARIF, JUnit and Markdown exports, and every page of a site built from
the same inputs (its ``manifest.json`` and ``build-status.json`` included). The inputs are
the built-in fixture, bundle and scenarios, the hostile test bundle, the conformance
folders, and generated bundles of 6,000 and 60,000 requests with 0%, 1% and 30% failing
rows (``generate_bundle.py``, fixed seed; ``--small`` leaves out the 60,000-request ones).
Each output is named by input and file, so ``compare`` prints exactly which changed.

``SOURCE_DATE_EPOCH`` is unset for every command, as for the committed site. The digests
file is JSON: ``{"tool_version": ..., "outputs": {"<input>/<command>/<path>": "<hex>"}}``.
Exit status of ``compare``: 0 when every output is the same, 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TOOL = [str(Path(sys.executable).parent / "sandbox-replay")]
GENERATED = [(6000, 0.0), (6000, 0.01), (6000, 0.3), (60000, 0.0), (60000, 0.01), (60000, 0.3)]


def _inputs(work: Path, small: bool) -> dict[str, tuple[Path, str]]:
    """Copy each input into ``work/inputs/<name>``; return its folder there and its mode.

    Every command runs in ``work`` on these copies, so the paths that records, exports
    and pages show are the same whichever checkout of the tool records them.
    """
    fixtures = REPO / "fixtures"
    inputs = {
        "first_wave": (fixtures / "first_wave", "fixture"),
        "exported_bundle": (fixtures / "bundles" / "exported_bundle", "bundle"),
        "hostile_bundle": (REPO / "tests" / "data" / "hostile_bundle", "bundle"),
        "conformance_fixture": (REPO / "tests" / "conformance" / "original_fixture", "fixture"),
        "conformance_bundle": (REPO / "tests" / "conformance" / "original_bundle", "bundle"),
    }
    for scenario in sorted((fixtures / "scenarios").iterdir()):
        inputs[f"scenario_{scenario.name}"] = (scenario, "bundle")
    copied = {}
    for name, (source, mode) in inputs.items():
        target = work / "inputs" / name
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(source, target)
        copied[name] = (target, mode)
    inputs = copied
    for requests, failing in GENERATED:
        if small and requests > 6000:
            continue
        name = f"generated_{requests}_{int(failing * 100)}pct"
        folder = work / "inputs" / name
        if not folder.is_dir():
            print(f"generating {name}", file=sys.stderr, flush=True)
            subprocess.run(
                [
                    sys.executable,
                    str(REPO / "benchmarks" / "generate_bundle.py"),
                    "--requests",
                    str(requests),
                    "--seed",
                    "7",
                    "--failing-fraction",
                    str(failing),
                    "--out",
                    str(folder),
                ],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        inputs[name] = (folder, "bundle")
    return inputs


def _digest_tree(root: Path, prefix: str, into: dict[str, str]) -> None:
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
        into[f"{prefix}/{path.relative_to(root).as_posix()}"] = digest.hexdigest()


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    return subprocess.run([*TOOL, *args], cwd=cwd, env=env, capture_output=True, check=False)


def record(work: Path, small: bool) -> dict[str, object]:
    """Replay and build every input; return the digest of every output."""
    work.mkdir(parents=True, exist_ok=True)
    outputs: dict[str, str] = {}
    for name, (folder, mode) in _inputs(work, small).items():
        print(f"replaying {name}", file=sys.stderr, flush=True)
        out = work / "out" / name
        shutil.rmtree(out, ignore_errors=True)
        command = "run" if mode == "fixture" else "run-sandbox-bundle"
        done = _run(
            [
                command,
                "--input",
                f"inputs/{name}",
                "--out",
                f"out/{name}/records",
                "--card",
                "--sarif",
                f"out/{name}/exports/findings.sarif",
                "--junit",
                f"out/{name}/exports/checks.xml",
                "--markdown",
                f"out/{name}/exports/summary.md",
            ],
            work,
        )
        if done.returncode not in (0, 1):
            raise SystemExit(f"{name}: {command} exited {done.returncode}: {done.stderr[-400:]!r}")
        outputs[f"{name}/{command}/exit"] = str(done.returncode)
        outputs[f"{name}/{command}/card"] = hashlib.sha256(done.stdout).hexdigest()
        _digest_tree(out / "records", f"{name}/{command}", outputs)
        _digest_tree(out / "exports", f"{name}/exports", outputs)
        # A site per input (its path is on the pages, so ``--work`` must be the same
        # folder for two records to compare).
        site = work / "sites" / name
        built = _run(["build", f"inputs/{name}", "--out", f"sites/{name}", "--rebuild"], work)
        if built.returncode != 0:
            raise SystemExit(f"{name}: build exited {built.returncode}: {built.stderr[-400:]!r}")
        _digest_tree(site, f"{name}/build", outputs)
    version = _run(["--version"], REPO).stdout.decode().strip()
    return {"tool_version": version, "outputs": outputs}


def compare(before: dict[str, object], after: dict[str, object]) -> list[str]:
    """Return one line per output that differs, is new or is gone."""
    old = before["outputs"]
    new = after["outputs"]
    assert isinstance(old, dict) and isinstance(new, dict)
    lines = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            lines.append(f"gone:    {key}")
        elif key not in old:
            lines.append(f"new:     {key}")
        elif old[key] != new[key]:
            lines.append(f"changed: {key}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("record", help="replay every input and write the digests")
    rec.add_argument("--work", type=Path, required=True, help="scratch folder (inputs kept)")
    rec.add_argument("--out", type=Path, required=True, help="digests file to write")
    rec.add_argument("--small", action="store_true", help="leave out the 60,000-request runs")
    cmp = sub.add_parser("compare", help="compare two digests files")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    args = parser.parse_args()
    if args.command == "record":
        digests = record(args.work, args.small)
        args.out.write_text(json.dumps(digests, indent=1, sort_keys=True) + "\n", "utf-8")
        print(f"{len(digests['outputs'])} outputs recorded in {args.out}")  # type: ignore[arg-type]
        return 0
    before = json.loads(args.before.read_text("utf-8"))
    after = json.loads(args.after.read_text("utf-8"))
    differences = compare(before, after)
    for line in differences:
        print(line)
    total = len(after["outputs"])
    print(f"{total} outputs, {len(differences)} different")
    return 1 if differences else 0


if __name__ == "__main__":
    raise SystemExit(main())
