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

from sandbox_replay.checks.base import LayerResult
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
# manifest cannot ask for millions of searches (20,000 anchors on a 5 MiB body took 62 s).
MAX_ANCHORS = 256


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
    on_body: Callable[[str, bytes], None] = lambda rel, body: None,
) -> tuple[LayerResult, SourceModuleOutcome]:
    """Check the manifest's boundary flags, its count, and every module's body on disk.

    A body larger than ``max_body_bytes`` is refused by its size and never read. Each
    body read is shown to ``on_body`` (its path relative to the run's root, its bytes):
    the forbidden-material scan sees the very bytes whose digest was checked.
    """
    result = LayerResult(Layer.SOURCE_MODULES)
    outcome = SourceModuleOutcome()
    manifest = run.object(SOURCE_MODULE_MANIFEST)
    name = SOURCE_MODULE_MANIFEST

    def add(code: str, message: str, subject: str, line: int | None) -> None:
        result.add(code, message, FLOOR, subject, "source_module", name, line)

    if manifest is None:
        add(
            codes.SOURCE_MODULE_MANIFEST_REQUIRED,
            f"{name} is required in bundle mode and did not load",
            name,
            None,
        )
        outcome.status = "blocked"
        return result, outcome
    if manifest.get("source_import_class") != IMPORT_CLASS:
        add(
            codes.SOURCE_MODULE_CLASS_REQUIRED,
            f"manifest source_import_class is not {IMPORT_CLASS}",
            name,
            run.key_line(name, "source_import_class"),
        )
    if (
        manifest.get("body_in_receipt") is not False
        or manifest.get("body_text_in_receipt") is not False
    ):
        add(
            codes.SOURCE_MODULE_BODY_BOUNDARY_REQUIRED,
            "manifest body_in_receipt and body_text_in_receipt must both be exactly false",
            name,
            run.key_line(name, "body_in_receipt", "body_text_in_receipt"),
        )
    modules = manifest.get("modules")
    if not isinstance(modules, list) or not modules:
        add(
            codes.SOURCE_MODULE_MANIFEST_REQUIRED,
            "manifest lists no modules",
            name,
            run.key_line(name, "modules"),
        )
        modules = []
    count = manifest.get("module_count")
    if not isinstance(count, int) or isinstance(count, bool) or count != len(modules):
        add(
            codes.SOURCE_MODULE_COUNT_MISMATCH,
            f"module_count does not equal the {len(modules)} module(s) listed",
            name,
            run.key_line(name, "module_count"),
        )
    line = run.key_line(name, "modules")
    # Each module id and each body once: a second entry naming either is a finding and is
    # not read again (400 entries naming one 50 MiB body were 19.5 GiB to hash and scan).
    seen: set[object] = set()
    for index, module in enumerate(modules):
        if _repeated(run, index, module, seen, line, add):
            continue
        _check_module(run, index, module, line, add, outcome, max_body_bytes, on_body)
    result.counts = {
        "module_count": len(modules),
        "module_verified_count": sum(1 for b in outcome.bodies if b.verified),
    }
    outcome.status = "pass" if not result.findings else "blocked"
    return result, outcome


def _repeated(
    run: RunInputs, index: int, module: object, seen: set[object], line: int, add: Any
) -> bool:
    """Say whether an entry names a module id or a body an earlier entry named (a finding)."""
    if not isinstance(module, Mapping):
        return False
    module_id = module.get("module_id")
    path = safe_module_path(run.root, module.get("path"))
    keys: list[tuple[str, object]] = []
    if isinstance(module_id, str) and module_id:
        keys.append(("id", module_id))
    keys += [("path", path)] if path is not None else []
    repeated = [kind for kind, key in keys if (kind, key) in seen]
    seen.update(keys)
    if not repeated:
        return False
    subject = module_id if isinstance(module_id, str) and module_id else f"module#{index}"
    what = " and ".join("module id" if kind == "id" else "body path" for kind in repeated)
    add(
        codes.SOURCE_MODULE_DUPLICATE,
        f"{subject} repeats the {what} of an earlier entry; it was not read again",
        subject,
        line,
    )
    return True


def _check_module(
    run: RunInputs,
    index: int,
    module: object,
    line: int,
    add: Any,
    outcome: SourceModuleOutcome,
    max_body_bytes: int,
    on_body: Callable[[str, bytes], None],
) -> None:
    if not isinstance(module, Mapping):
        add(
            codes.SOURCE_MODULE_CLASS_REQUIRED,
            f"module {index} is not an object",
            f"module#{index}",
            line,
        )
        return
    module_id = module.get("module_id")
    subject = module_id if isinstance(module_id, str) and module_id else f"module#{index}"
    ok = True
    if not (isinstance(module_id, str) and module_id.strip()):
        add(
            codes.SOURCE_MODULE_CLASS_REQUIRED,
            f"{subject} has no module_id string",
            subject,
            line,
        )
        ok = False
    if (
        not isinstance(module.get("material_class"), str)
        or module.get("material_class") not in MATERIAL_CLASSES
        or module.get("source_import_class") != IMPORT_CLASS
    ):
        add(
            codes.SOURCE_MODULE_CLASS_REQUIRED,
            f"{subject} lacks a known material_class or the {IMPORT_CLASS} import class",
            subject,
            line,
        )
        ok = False
    wrong = [k for k, v in BODY_FLAGS.items() if module.get(k) is not v]
    if wrong:
        add(
            codes.SOURCE_MODULE_BODY_BOUNDARY_REQUIRED,
            f"{subject} body flags not as required: {', '.join(wrong)}",
            subject,
            line,
        )
        ok = False
    declared_path = module.get("path")
    path = safe_module_path(run.root, declared_path)
    if path is None:
        add(
            codes.SOURCE_MODULE_PATH_UNSAFE
            if declared_path
            else codes.SOURCE_MODULE_TARGET_MISSING,
            f"{subject} path is missing, absolute, climbs with '..' or leaves "
            f"{SOURCE_MODULES_DIR}/; it was not opened",
            subject,
            line,
        )
        return
    target_ref = module.get("target_ref")
    if target_ref is not None and not isinstance(target_ref, str):
        add(
            codes.SOURCE_MODULE_TARGET_MISSING,
            f"{subject} target_ref is not a string",
            subject,
            line,
        )
        ok = False
    elif target_ref is not None and not safe_target_ref(target_ref):
        add(
            codes.SOURCE_MODULE_PATH_UNSAFE,
            f"{subject} target_ref is empty, absolute or climbs with '..'; it is "
            "informational and was not opened",
            subject,
            line,
        )
        ok = False
    missing = "is not in the bundle"
    try:
        info = path.stat()  # ``path`` is resolved: no symlink left in it
        if not stat.S_ISREG(info.st_mode):
            raise FileNotFoundError
        if info.st_size > max_body_bytes:
            add(
                codes.INPUT_LIMIT_EXCEEDED,
                f"{subject} body is {info.st_size} bytes, over the limit of {max_body_bytes} "
                "bytes (max_file_bytes); it was not read",
                subject,
                line,
            )
            return
        body: bytes | None = read_same_file(path, info, max_body_bytes)
    except FileChangedError as exc:
        body, missing = None, f"{exc}; it was not used"
    except FileNotFoundError:
        body = None
    except OSError as exc:  # there, and a regular file, but refused (permissions, I/O)
        add(
            codes.SOURCE_MODULE_BODY_UNREADABLE,
            f"{subject} body could not be read ({exc.strerror or type(exc).__name__})",
            subject,
            line,
        )
        return
    if body is None:
        add(
            codes.SOURCE_MODULE_TARGET_MISSING,
            f"{subject} body {missing}",
            subject,
            line,
        )
        return
    rel = path.relative_to(run.root.resolve()).as_posix()
    on_body(rel, body)
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    bad_digests = [k for k in DIGEST_KEYS if module.get(k) != digest]
    if bad_digests:
        add(
            codes.SOURCE_MODULE_DIGEST_MISMATCH,
            f"{subject} copied body does not match {', '.join(bad_digests)}",
            subject,
            line,
        )
        ok = False
    anchors = module.get("required_anchors")
    anchor_list = (
        [a for a in anchors if isinstance(a, str) and a] if isinstance(anchors, list) else []
    )
    if not anchor_list:
        add(
            codes.SOURCE_MODULE_ANCHOR_MISSING,
            f"{subject} declares no required anchors",
            subject,
            line,
        )
        ok = False
    elif len(anchor_list) > MAX_ANCHORS:
        add(
            codes.INPUT_LIMIT_EXCEEDED,
            f"{subject} declares {len(anchor_list)} required anchors, over the limit of "
            f"{MAX_ANCHORS}; none was searched for",
            subject,
            line,
        )
        ok = False
        anchor_list = []
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The original implementation treats such a body as unreadable, a blocking hit
        # (FORMAT 7.3): its anchors cannot be found in text that is not text.
        add(
            codes.SOURCE_MODULE_BODY_UNREADABLE,
            f"{subject} copied body is not valid UTF-8 (first bad byte at offset {exc.start})",
            subject,
            line,
        )
        ok = False
        text = body.decode("utf-8", errors="replace")
    absent = sum(1 for a in anchor_list if a not in text)
    if absent:
        add(
            codes.SOURCE_MODULE_ANCHOR_MISSING,
            f"{subject} copied body lacks {absent} of its {len(anchor_list)} required anchor(s)",
            subject,
            line,
        )
        ok = False
    outcome.bodies.append(
        ModuleBody(
            subject,
            rel,
            str(module.get("material_class")),
            digest,
            len(body),
            tuple(anchor_list),
            ok,
        )
    )
