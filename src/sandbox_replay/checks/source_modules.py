"""Source-module manifest (bundle mode): copied public bodies, by digest and anchor.

Bodies are read only to hash them and to look for their anchors; nothing of a body
reaches a finding or a record. A module path that is absolute, climbs with ``..`` or
resolves outside the bundle's ``source_modules/`` folder is refused and never opened.
"""

from __future__ import annotations

import hashlib
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from sandbox_replay.checks.base import Gap, LayerResult
from sandbox_replay.load.files import FileChangedError, LoadLimits, read_same_file
from sandbox_replay.load.run import SOURCE_MODULE_MANIFEST, SOURCE_MODULES_DIR, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer

FLOOR = "source_module_manifest_floor"
IMPORT_CLASS = "copied_non_secret_macro_body"
MATERIAL_CLASSES = frozenset(
    {
        "public_macro_control_plane_body",
        "public_macro_pattern_body",
        "public_macro_receipt_body",
        "public_macro_standard_body",
        "public_macro_tool_body",
    }
)
DIGEST_KEYS = ("sha256", "source_sha256", "target_sha256")
BODY_FLAGS = {"body_copied": True, "body_in_receipt": False, "body_text_in_receipt": False}
# A module's required anchors are each searched for in its whole body: bounded, so that a
# manifest cannot ask for millions of searches.
MAX_ANCHORS = 256
KIND = "source_module"
Keys = tuple[str, ...]


@dataclass(frozen=True)
class ModuleBody:
    """A copied body that was safely read: where it is and its digest (never its text)."""

    module_id: str
    path: str
    material_class: str
    sha256: str
    size: int
    anchors: tuple[str, ...]
    verified: bool


@dataclass
class SourceModuleOutcome:
    """The bodies that were read (for the scan and the report) and the manifest status."""

    bodies: list[ModuleBody] = field(default_factory=list)
    status: str = "not_applicable"


def safe_module_path(root: Path, declared: object) -> Path | None:
    """Resolve a declared module path inside ``root/source_modules``, or None if unsafe."""
    if not isinstance(declared, str) or not declared or "\x00" in declared or "\\" in declared:
        return None
    pure = PurePosixPath(declared)
    if pure.is_absolute() or ".." in pure.parts or pure.parts[:1] != (SOURCE_MODULES_DIR,):
        return None
    try:
        # The folder itself may be a symlink: it must still lie inside the bundle.
        base = (root / SOURCE_MODULES_DIR).resolve()
        resolved = (root / pure).resolve(strict=False)
    except (OSError, RuntimeError):
        return None
    if not base.is_relative_to(root.resolve()):
        return None
    if not resolved.is_relative_to(base) or resolved == base:
        return None
    return resolved


def safe_target_ref(declared: object) -> bool:
    """Say whether an informational ``target_ref`` is a plain relative path (never opened)."""
    if not isinstance(declared, str) or "\x00" in declared or "\\" in declared:
        return False
    pure = PurePosixPath(declared)
    return bool(declared) and not pure.is_absolute() and ".." not in pure.parts


def check(
    run: RunInputs,
    max_body_bytes: int = LoadLimits().max_file_bytes,
    on_body: Callable[[str, bytes], bytes | None] = lambda rel, body: None,
) -> tuple[LayerResult, SourceModuleOutcome]:
    """Check the manifest's boundary flags, its count, and every module's body on disk.

    A body larger than ``max_body_bytes`` is refused by its size and never read. Each
    body read is shown to ``on_body`` (its path relative to the run's root, its bytes):
    the forbidden-material scan sees the very bytes whose digest was checked. Bytes it
    returns are checked instead (a seeded escape's edit, ``sensitivity``).
    """
    result = LayerResult(Layer.SOURCE_MODULES)
    outcome = SourceModuleOutcome()
    name = SOURCE_MODULE_MANIFEST
    manifest = run.object(name)
    if manifest is None:
        message = f"{name} is required in bundle mode and did not load"
        result.add(codes.SOURCE_MODULE_MANIFEST_REQUIRED, message, FLOOR, name, KIND, name)
        outcome.status = "blocked"
        return result, outcome
    modules = manifest.get("modules")
    if not isinstance(modules, list):
        modules = []
    for code, message, keys in _manifest_gaps(manifest, len(modules)):
        result.add(code, message, FLOOR, name, KIND, name, run.key_line(name, *keys))
    line = run.key_line(name, "modules")
    # Each module id and each body once: a second entry naming either is a finding and is
    # not read again.
    seen: set[object] = set()
    for index, module in enumerate(modules):
        subject = f"module#{index}"
        if isinstance(module, Mapping):
            module_id = module.get("module_id")
            subject = module_id if isinstance(module_id, str) and module_id else subject
            found = _repeats(run, module, seen, subject)
            found = found or _module_gaps(run, module, subject, outcome, max_body_bytes, on_body)
        else:
            found = [(codes.SOURCE_MODULE_CLASS_REQUIRED, f"module {index} is not an object")]
        for code, message in found:
            result.add(code, message, FLOOR, subject, KIND, name, line)
    result.counts = {
        "module_count": len(modules),
        "module_verified_count": sum(1 for b in outcome.bodies if b.verified),
    }
    outcome.status = "pass" if not result.findings else "blocked"
    return result, outcome


def _manifest_gaps(manifest: Mapping[str, Any], listed: int) -> list[tuple[str, str, Keys]]:
    """Return the manifest's own gaps: code, message and the keys whose line it points at."""
    gaps: list[tuple[str, str, Keys]] = []
    if manifest.get("source_import_class") != IMPORT_CLASS:
        message = f"manifest source_import_class is not {IMPORT_CLASS}"
        gaps.append((codes.SOURCE_MODULE_CLASS_REQUIRED, message, ("source_import_class",)))
    boundary = ("body_in_receipt", "body_text_in_receipt")
    if any(manifest.get(key) is not False for key in boundary):
        message = "manifest body_in_receipt and body_text_in_receipt must both be exactly false"
        gaps.append((codes.SOURCE_MODULE_BODY_BOUNDARY_REQUIRED, message, boundary))
    if not listed:
        message = "manifest lists no modules"
        gaps.append((codes.SOURCE_MODULE_MANIFEST_REQUIRED, message, ("modules",)))
    count = manifest.get("module_count")
    if not isinstance(count, int) or isinstance(count, bool) or count != listed:
        message = f"module_count does not equal the {listed} module(s) listed"
        gaps.append((codes.SOURCE_MODULE_COUNT_MISMATCH, message, ("module_count",)))
    return gaps


def _repeats(
    run: RunInputs, module: Mapping[str, Any], seen: set[object], subject: str
) -> list[Gap]:
    """Return a finding when an entry names a module id or a body an earlier entry named."""
    module_id = module.get("module_id")
    path = safe_module_path(run.root, module.get("path"))
    keys: list[tuple[str, object]] = []
    if isinstance(module_id, str) and module_id:
        keys.append(("module id", module_id))
    if path is not None:
        keys.append(("body path", path))
    repeated = [kind for kind, key in keys if (kind, key) in seen]
    seen.update(keys)
    if not repeated:
        return []
    what = " and ".join(repeated)
    message = f"{subject} repeats the {what} of an earlier entry; it was not read again"
    return [(codes.SOURCE_MODULE_DUPLICATE, message)]


def _module_gaps(
    run: RunInputs,
    module: Mapping[str, Any],
    subject: str,
    outcome: SourceModuleOutcome,
    max_body_bytes: int,
    on_body: Callable[[str, bytes], bytes | None],
) -> list[Gap]:
    """Return one module's gaps; record its body in ``outcome`` when it could be read.

    The body is verified when the module has no gap at all.
    """
    found = _declared_gaps(module, subject)
    declared_path = module.get("path")
    path = safe_module_path(run.root, declared_path)
    if path is None:
        code = (
            codes.SOURCE_MODULE_PATH_UNSAFE if declared_path else codes.SOURCE_MODULE_TARGET_MISSING
        )
        message = (
            f"{subject} path is missing, absolute, climbs with '..' or leaves "
            f"{SOURCE_MODULES_DIR}/; it was not opened"
        )
        return [*found, (code, message)]
    found += _target_ref_gaps(module.get("target_ref"), subject)
    body = _read_body(path, subject, max_body_bytes, found)
    if body is None:
        return found
    rel = path.relative_to(run.root.resolve()).as_posix()
    body = on_body(rel, body) or body
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    bad_digests = [k for k in DIGEST_KEYS if module.get(k) != digest]
    if bad_digests:
        message = f"{subject} copied body does not match {', '.join(bad_digests)}"
        found.append((codes.SOURCE_MODULE_DIGEST_MISMATCH, message))
    anchors = _anchors(module.get("required_anchors"), subject, found)
    found += _text_gaps(body, anchors, subject)
    material_class = str(module.get("material_class"))
    ok = not found
    outcome.bodies.append(
        ModuleBody(subject, rel, material_class, digest, len(body), tuple(anchors), ok)
    )
    return found


def _declared_gaps(module: Mapping[str, Any], subject: str) -> list[Gap]:
    """Return the gaps in what an entry declares of itself: id, classes and body flags."""
    found = []
    module_id = module.get("module_id")
    if not (isinstance(module_id, str) and module_id.strip()):
        found.append((codes.SOURCE_MODULE_CLASS_REQUIRED, f"{subject} has no module_id string"))
    material_class = module.get("material_class")
    if (
        not isinstance(material_class, str)
        or material_class not in MATERIAL_CLASSES
        or module.get("source_import_class") != IMPORT_CLASS
    ):
        message = f"{subject} lacks a known material_class or the {IMPORT_CLASS} import class"
        found.append((codes.SOURCE_MODULE_CLASS_REQUIRED, message))
    wrong = [k for k, v in BODY_FLAGS.items() if module.get(k) is not v]
    if wrong:
        message = f"{subject} body flags not as required: {', '.join(wrong)}"
        found.append((codes.SOURCE_MODULE_BODY_BOUNDARY_REQUIRED, message))
    return found


def _target_ref_gaps(target_ref: object, subject: str) -> list[Gap]:
    """Return the gap in an informational ``target_ref``, if any (it is never opened)."""
    if target_ref is None:
        return []
    if not isinstance(target_ref, str):
        return [(codes.SOURCE_MODULE_TARGET_MISSING, f"{subject} target_ref is not a string")]
    if safe_target_ref(target_ref):
        return []
    message = (
        f"{subject} target_ref is empty, absolute or climbs with '..'; it is "
        "informational and was not opened"
    )
    return [(codes.SOURCE_MODULE_PATH_UNSAFE, message)]


def _read_body(path: Path, subject: str, max_body_bytes: int, found: list[Gap]) -> bytes | None:
    """Return a module's body, or None with the reason added to ``found``."""
    missing = "is not in the bundle"
    try:
        info = path.stat()  # ``path`` is resolved: no symlink left in it
        if not stat.S_ISREG(info.st_mode):
            raise FileNotFoundError
        if info.st_size > max_body_bytes:
            message = (
                f"{subject} body is {info.st_size} bytes, over the limit of {max_body_bytes} "
                "bytes (max_file_bytes); it was not read"
            )
            found.append((codes.INPUT_LIMIT_EXCEEDED, message))
            return None
        return read_same_file(path, info, max_body_bytes)
    except FileChangedError as exc:
        missing = f"{exc}; it was not used"
    except FileNotFoundError:
        pass
    except OSError as exc:  # there, and a regular file, but refused (permissions, I/O)
        reason = exc.strerror or type(exc).__name__
        found.append(
            (codes.SOURCE_MODULE_BODY_UNREADABLE, f"{subject} body could not be read ({reason})")
        )
        return None
    found.append((codes.SOURCE_MODULE_TARGET_MISSING, f"{subject} body {missing}"))
    return None


def _anchors(declared: object, subject: str, found: list[Gap]) -> list[str]:
    """Return the anchors to search a body for; add a gap when there are none or too many."""
    anchors = (
        [a for a in declared if isinstance(a, str) and a] if isinstance(declared, list) else []
    )
    if not anchors:
        found.append(
            (codes.SOURCE_MODULE_ANCHOR_MISSING, f"{subject} declares no required anchors")
        )
    elif len(anchors) > MAX_ANCHORS:
        message = (
            f"{subject} declares {len(anchors)} required anchors, over the limit of "
            f"{MAX_ANCHORS}; none was searched for"
        )
        found.append((codes.INPUT_LIMIT_EXCEEDED, message))
        return []
    return anchors


def _text_gaps(body: bytes, anchors: list[str], subject: str) -> list[Gap]:
    """Return the gaps of a body as text: not UTF-8, or lacking some of its anchors."""
    found = []
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The original implementation treats such a body as unreadable, a blocking hit
        # (FORMAT 7.3): its anchors cannot be found in text that is not text.
        message = f"{subject} copied body is not valid UTF-8 (first bad byte at offset {exc.start})"
        found.append((codes.SOURCE_MODULE_BODY_UNREADABLE, message))
        text = body.decode("utf-8", errors="replace")
    absent = sum(1 for a in anchors if a not in text)
    if absent:
        message = f"{subject} copied body lacks {absent} of its {len(anchors)} required anchor(s)"
        found.append((codes.SOURCE_MODULE_ANCHOR_MISSING, message))
    return found
