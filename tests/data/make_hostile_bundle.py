"""Write ``tests/data/hostile_bundle/``: the exported bundle with attack text in every string.

Usage (from the repository root)::

    .venv/bin/python tests/data/make_hostile_bundle.py [--check]

The bundle is ``fixtures/bundles/exported_bundle`` with ``ATTACK`` appended to every string
value of every input file (ids, episode ids, refs, labels, rule refs, policy id and
version, bundle id, module ids, target refs, replay commands, approval refs), plus one
unknown key per object whose name and value carry it too, one extra entry in each list of
names, and an extra required anchor written into each copied Markdown body. The same
suffix goes on every copy of a value, so the joins between files still hold. Request
shape fields (kind, capability, trust label, risk class) carry it on every other request
only, so the page also shows requests the policy table recognises. Module paths stay
plain (they name real files in git), as do the few values whose exact spelling the
format fixes (``material_class`` and ``source_import_class`` but for one module, and the
manifest's ``source_module_manifest_ref``); digests are recomputed.

``build_bundle(out, suffix)`` with a plain suffix gives the benign twin the tests compare
against: the same structure, derivations and findings, and none of the attack.

The bundle is clean for the forbidden-material scan (no sentinel, no credential shape),
so every page shows its values. ``--check`` writes nothing and exits 1 when the committed
bundle differs from what this script writes.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "fixtures" / "bundles" / "exported_bundle"
TARGET = Path(__file__).resolve().parent / "hostile_bundle"

PAYLOADS = (
    "<script>alert(1)</script>",
    "</script>",
    '"><img src=x onerror=alert(1)>',
    "' onmouseover='x",
    "javascript:alert(1)",
    "</svg><svg onload=alert(1)>",
    '"]); click A call alert(1)',
    "%%{init: {'securityLevel': 'loose'}}%%",
    "[x](javascript:alert(1))",
    "![i](http://example.invalid/x.png)",
    "| --- |",
    "\u202e",
    "\u2066",
    "\x00",
    "\x07",
    "\x1b[31m",
    "&amp;",
)
ATTACK = "".join(PAYLOADS)
# An unbroken run longer than any cell is wide; the records keep up to 512 characters.
LONG = "W" * 600
SHAPE_FIELDS = ("action_kind", "requested_capability", "source_trust_label", "risk_class")
# Values the format spells exactly and the tool reads as such; attacked on one module only.
FIXED_FIELDS = ("material_class", "source_import_class")
PLAIN_FIELDS = (
    "path",
    "source_module_manifest_ref",
    "sha256",
    "source_sha256",
    "target_sha256",
    "verification_status",
)
NAME_LISTS = ("required_action_fields", "required_verdict_fields", "required_effect_fields")


def _attack_value(value: Any, suffix: str) -> Any:
    if isinstance(value, str):
        return value + suffix
    if isinstance(value, list):
        return [_attack_value(item, suffix) for item in value]
    if isinstance(value, dict):
        return _attack_object(value, suffix)
    return value


def _attack_object(row: dict[str, Any], suffix: str, keep: tuple[str, ...] = ()) -> dict[str, Any]:
    attacked: dict[str, Any] = {}
    for key, value in row.items():
        if key in PLAIN_FIELDS or key in keep:
            attacked[key] = value
        elif key in NAME_LISTS or key == "allowed_verdicts":
            attacked[key] = [*value, value[-1] + suffix]
        else:
            attacked[key] = _attack_value(value, suffix)
    attacked["note" + suffix] = "unknown key" + suffix
    return attacked


def _attack_file(name: str, data: dict[str, Any], suffix: str) -> dict[str, Any]:
    if name == "action_requests.json":
        rows = data["action_requests"]
        attacked = [
            _attack_object(row, suffix, keep=SHAPE_FIELDS if index % 2 else ())
            for index, row in enumerate(rows)
        ]
        attacked[0]["normalized_action_ref"] += LONG
        attacked[1]["episode_id"] = LONG + suffix  # one unbroken id, shared by no other row
        return {"action_requests": attacked, "note" + suffix: "unknown key" + suffix}
    if name == "source_module_manifest.json":
        modules = [
            _attack_object(module, suffix, keep=() if index == 0 else FIXED_FIELDS)
            for index, module in enumerate(data["modules"])
        ]
        for module in modules:
            # A NUL makes target_ref a path the tool refuses (tests/test_path_safety.py);
            # here it carries the rest of the attack, so the twin's findings are the same.
            module["target_ref"] = module["target_ref"].replace("\x00", "")
            module["required_anchors"] = [
                a.removesuffix(suffix) for a in module["required_anchors"]
            ]
            if module["path"].endswith(".md"):
                module["required_anchors"].append("anchor" + suffix)
        top = _attack_object(
            {k: v for k, v in data.items() if k != "modules"}, suffix, FIXED_FIELDS
        )
        top["modules"] = modules
        return top
    return _attack_object(data, suffix)


def build_bundle(out: Path, suffix: str = ATTACK) -> None:
    """Write the bundle with ``suffix`` on its strings into ``out`` (which must not exist)."""
    shutil.copytree(SOURCE, out)
    for path in sorted(out.glob("*.json")):
        data = json.loads(path.read_text("utf-8"))
        attacked = _attack_file(path.name, data, suffix)
        path.write_text(json.dumps(attacked, indent=2, ensure_ascii=False) + "\n", "utf-8")
    manifest_path = out / "source_module_manifest.json"
    manifest = json.loads(manifest_path.read_text("utf-8"))
    for module in manifest["modules"]:
        body = out / module["path"]
        if body.suffix == ".md":
            with body.open("a", encoding="utf-8") as handle:
                handle.write("\nanchor" + suffix + "\n")
        digest = "sha256:" + hashlib.sha256(body.read_bytes()).hexdigest()
        module.update(sha256=digest, source_sha256=digest, target_sha256=digest)
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", "utf-8")


def same_tree(a: Path, b: Path) -> bool:
    files_a = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b) for p in b.rglob("*") if p.is_file())
    return files_a == files_b and all(filecmp.cmp(a / f, b / f, shallow=False) for f in files_a)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare only, write nothing")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        fresh = Path(tmp) / "hostile_bundle"
        build_bundle(fresh)
        if args.check:
            current = TARGET.is_dir() and same_tree(fresh, TARGET)
            if not current:
                print(f"{TARGET} is stale; rerun without --check", file=sys.stderr)
            return 0 if current else 1
        shutil.rmtree(TARGET, ignore_errors=True)
        shutil.copytree(fresh, TARGET)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
