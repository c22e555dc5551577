"""Run one replay: load, scan, validate every layer, derive the trace, apply the pass rule.

This is the library entry point the CLI and the site builder call. It reads only the
input folder and writes nothing; the records it returns are written by ``records``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from sandbox_replay.checks import (
    actions,
    bundle_manifest,
    cold_replay,
    confusables,
    forbidden_keys,
    negative_cases,
    projection,
    rollbacks,
    sandbox_policy,
    sensitivity,
    side_effects,
    source_modules,
    verdicts,
)
from sandbox_replay.checks.base import LayerResult, forget_shared
from sandbox_replay.checks.trace import Trace, build_trace
from sandbox_replay.load.files import LoadLimits
from sandbox_replay.load.run import PROJECTION_PROTOCOL, InputMode, RunInputs, load_run
from sandbox_replay.load.scan import ForbiddenScanner, ScanHit, ScanReport
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.findings import Finding
from sandbox_replay.model.policy import Policy, default_table
from sandbox_replay.model.rows import Table


@dataclass(frozen=True)
class ReplayConfig:
    """What one replay needs: where its inputs are, which mode, and its limits."""

    input_dir: Path
    mode: InputMode
    limits: LoadLimits = field(default_factory=LoadLimits)
    # The policy in force; the packaged table when None.
    policy: Policy | None = None
    scanner: ForbiddenScanner | None = None
    # Told one line per phase (load, layers, trace) with its figures and time, for a long run.
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    # Told one line per layer with its time (the command line's -v).
    detail: Callable[[str], None] | None = field(default=None, compare=False)
    # Seeded escapes replayed on the run's rows (``checks.sensitivity``); a missed one
    # blocks the run when required (which also turns them on).
    sensitivity: bool = False
    require_sensitivity: bool = False


@dataclass
class InputFileInfo:
    """One input file as the report lists it: never its body."""

    path: str
    size: int
    sha256: str
    loaded: bool
    withheld: bool
    kind: str


@dataclass
class Replay:
    """Everything one replay found, before it is turned into records and pages."""

    config: ReplayConfig
    run: RunInputs
    layers: list[LayerResult]
    trace: Trace
    scan: ScanReport
    negative: negative_cases.NegativeCaseOutcome | None
    modules: source_modules.SourceModuleOutcome | None
    bundle_id: str
    passed: bool
    inputs: list[InputFileInfo]
    sensitivity: sensitivity.Sensitivity | None = None

    @property
    def findings(self) -> list[Finding]:
        found = [f for layer in self.layers for f in layer.findings]
        return sorted(found, key=Finding.sort_key)

    def layer(self, layer: Layer) -> LayerResult | None:
        return next((r for r in self.layers if r.layer is layer), None)

    @property
    def status(self) -> str:
        return "pass" if self.passed else "blocked"


class _ScanCollector:
    """Scan each file's bytes as the loader reads them, keeping counts by file and class.

    A JSON string can spell a token with escapes (``SRX\\u005fSENTINEL...``) that the raw
    bytes do not match but the parsed value, and so every record and page built from it,
    would hold. So a file holding any backslash is scanned a second time as its parsed
    keys and string values (``scan_decoded``); per class the larger count is kept.
    """

    def __init__(self, scanner: ForbiddenScanner) -> None:
        self.scanner = scanner
        self.counts: dict[str, dict[str, int]] = {}
        self.matched: set[bytes] = set()
        self.escaped: set[str] = set()
        self.files = 0
        self.bytes = 0

    def __call__(self, name: str, raw: bytes) -> None:
        counts, matched = self.scanner.scan_bytes(raw)
        self._keep(name, len(raw), counts, matched)
        if b"\\" in raw:
            self.escaped.add(name)

    def decoded(self, name: str, data: Any) -> None:
        """See a file's parsed value: scanned again (``scan_decoded``) if its bytes held escapes."""
        if name in self.escaped:
            self.scan_decoded(name, data)

    def scan_decoded(self, name: str, data: Any) -> None:
        """Scan the parsed strings of a file that held escapes, in bounded chunks, one string
        a line (no token spans two strings)."""
        found: dict[str, int] = {}
        strings = list(_strings_of(data))
        start = 0
        for end in _chunk_ends([len(text) for text in strings], _DECODED_CHUNK):
            chunk = "\n".join(strings[start:end]).encode("utf-8", errors="surrogatepass")
            counts, matched = self.scanner.scan_bytes(chunk)
            for class_id, count in counts.items():
                found[class_id] = found.get(class_id, 0) + count
            self.matched |= matched
            start = end
        if found:
            mine = self.counts.setdefault(name, {})
            for class_id, count in found.items():
                mine[class_id] = max(mine.get(class_id, 0), count)

    def scan_body(self, name: str, body: bytes) -> None:
        """Scan a copied source-module body (bytes read once, for its digest and this)."""
        counts, matched = self.scanner.scan_bytes(body)
        self._keep(name, len(body), counts, matched)

    def _keep(self, name: str, size: int, counts: dict[str, int], matched: set[bytes]) -> None:
        self.files += 1
        self.bytes += size
        if counts:
            self.counts[name] = counts
            self.matched |= matched

    def report(self) -> ScanReport:
        hits = tuple(
            ScanHit(path, class_id, count)
            for path in sorted(self.counts)
            for class_id, count in sorted(self.counts[path].items())
        )
        return ScanReport(
            files_scanned=self.files,
            bytes_scanned=self.bytes,
            hits=hits,
            classes=self.scanner.classes,
            matched_texts=frozenset(self.matched),
        )


def replay(config: ReplayConfig) -> Replay:
    """Replay one fixture or bundle folder and return what every layer found."""
    policy = config.policy or default_table()
    scanner = config.scanner if config.scanner is not None else ForbiddenScanner.default()
    collector = _ScanCollector(scanner)
    extra = negative_cases.NEGATIVE_CASE_FILES if config.mode is InputMode.FIXTURE else None
    say = config.progress or _silent
    started = time.perf_counter()
    run = load_run(
        config.input_dir, config.mode, policy, config.limits, extra, collector, collector.decoded
    )
    layers = [_strict_load_layer(run)]
    modules = None
    if config.mode is InputMode.BUNDLE:
        module_layer, modules = source_modules.check(
            run, config.limits.max_file_bytes, collector.scan_body
        )
    scan = collector.report()
    tables = (run.requests, run.verdicts, run.effects, run.rollbacks, run.replays)
    rows = sum(len(table) for table in tables)
    say(
        f"loaded and scanned {collector.files} files ({collector.bytes / 1e6:.1f} MB, "
        f"{rows} rows) in {time.perf_counter() - started:.1f}s"
    )
    started = time.perf_counter()
    layers += _row_layers(run, scan, config.detail)
    say(f"checked the rows against every layer in {time.perf_counter() - started:.1f}s")
    started = time.perf_counter()
    bundle_id = _bundle_id(run, config.mode)
    trace = build_trace(run, bundle_id)
    forget_shared(run)  # what the layers and the trace shared; the records need none
    layers.append(trace.audit)
    say(f"built the trace ({len(trace.spans)} spans) in {time.perf_counter() - started:.1f}s")
    negative = None
    if config.mode is InputMode.FIXTURE:
        negative_layer, negative = negative_cases.check(run)
        layers.append(negative_layer)
    else:
        layers += [bundle_manifest.check(run), module_layer]
    seeded = None
    if config.sensitivity or config.require_sensitivity:
        started = time.perf_counter()
        seeded = _sensitivity(run, config, scanner, bundle_id, modules)
        if seeded.required:
            layers.append(sensitivity.layer(seeded))
        say(
            f"replayed {seeded.applicable} seeded escapes on "
            f"{sum(len(s.mutants) for s in seeded.scores)} rows ({seeded.caught} caught) "
            f"in {time.perf_counter() - started:.1f}s"
        )
    passed = _passes(layers, scan, negative, modules, config.mode)
    inputs = _input_files(run, scan, modules)
    return Replay(
        config, run, layers, trace, scan, negative, modules, bundle_id, passed, inputs, seeded
    )


def _sensitivity(
    run: RunInputs,
    config: ReplayConfig,
    scanner: ForbiddenScanner,
    bundle_id: str,
    modules: source_modules.SourceModuleOutcome | None,
) -> sensitivity.Sensitivity:
    """Score the seeded escapes with the layers of this replay, on a few rows at a time."""

    def judge(small: RunInputs) -> list[Finding]:
        collector = _ScanCollector(scanner)
        tables: tuple[Table[Any], ...] = (
            small.requests,
            small.verdicts,
            small.effects,
            small.rollbacks,
            small.replays,
        )
        for table in tables:  # re-scanned: an escape may plant a forbidden token
            collector(table.file, msgspec.json.encode(table.rows))
        layers = _row_layers(small, collector.report(), None)
        layers.append(build_trace(small, bundle_id).audit)
        return [f for layer in layers for f in layer.findings]

    def judge_modules(path: str, edit: Callable[[bytes], bytes]) -> list[Finding]:
        def on_body(rel: str, body: bytes) -> bytes | None:
            return edit(body) if rel == path else None

        return source_modules.check(run, config.limits.max_file_bytes, on_body)[0].findings

    bodies = modules.bodies if modules is not None else []
    with_modules = judge_modules if config.mode is InputMode.BUNDLE else None
    required = config.require_sensitivity
    return sensitivity.measure(run, judge, scanner, bodies, with_modules, required)


def _row_layers(
    run: RunInputs, scan: ScanReport, detail: Callable[[str], None] | None
) -> list[LayerResult]:
    """Run the forbidden-material layer and the layers over the rows, telling ``detail``
    each one's time."""
    found = _scan_layer(scan)
    keys_layer = forbidden_keys.check(run)
    found.findings.extend(keys_layer.findings)
    found.counts.update(keys_layer.counts)
    layers = [found]
    checks: list[Callable[[], LayerResult]] = [
        lambda: projection.check(run),
        lambda: sandbox_policy.check(run),
        lambda: confusables.check(actions.check(run), run),
        lambda: verdicts.check(run),
        lambda: side_effects.check(run),
        lambda: rollbacks.check(run),
        lambda: cold_replay.check(run),
    ]
    for check in checks:
        started = time.perf_counter()
        layers.append(check())
        if detail is not None:
            detail(f"  {layers[-1].layer.label}: {time.perf_counter() - started:.2f}s")
    return layers


def _bundle_id(run: RunInputs, mode: InputMode) -> str:
    if mode is InputMode.BUNDLE:
        return bundle_manifest.bundle_id_of(run) or "unknown_bundle"
    protocol_id = (run.object(PROJECTION_PROTOCOL) or {}).get("protocol_id")
    return f"fixture:{protocol_id}" if isinstance(protocol_id, str) else "fixture:unknown"


_DECODED_CHUNK = 4 * 1024 * 1024


def _silent(message: str) -> None:
    """Say nothing: the progress of a replay whose caller did not ask for it."""


def _chunk_ends(lengths: list[int], limit: int) -> Iterator[int]:
    """Yield where each chunk of strings ends: with the first that brings it to ``limit``.

    A string counts its length plus one for its line end; the last chunk may stay short.
    """
    size = 0
    for end, length in enumerate(lengths, 1):
        size += length + 1
        if size >= limit or end == len(lengths):
            yield end
            size = 0


def _strings_of(value: Any) -> Iterator[str]:
    """Yield every key and string value of a parsed JSON value, depth first, without recursion.

    A typed row's keys are the names of its kind's fields (the format's own words, proved
    to be all its text spelled), so only its values are yielded.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict):
            for key, child in item.items():
                yield key
                stack.append(child)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, msgspec.Struct):
            stack.extend(msgspec.structs.astuple(item))


def _strict_load_layer(run: RunInputs) -> LayerResult:
    result = LayerResult(Layer.STRICT_LOAD)
    for loaded in run.all_files():
        result.findings.extend(loaded.findings)
    result.counts = {
        "files_loaded": sum(1 for f in run.all_files() if f.ok),
        "files_expected": sum(1 for _ in run.all_files()),
    }
    return result


def _scan_layer(scan: ScanReport) -> LayerResult:
    result = LayerResult(Layer.FORBIDDEN_MATERIAL)
    for hit in scan.hits:
        result.add(
            codes.FORBIDDEN_MATERIAL_DETECTED,
            f"{hit.path}: {hit.count} match(es) of forbidden class {hit.class_id}",
            "forbidden_material_floor",
            hit.path,
            "input_file",
            hit.path,
        )
    result.counts = {
        "files_scanned": scan.files_scanned,
        "bytes_scanned": scan.bytes_scanned,
        "blocking_hit_count": scan.blocking_hit_count,
    }
    return result


def _passes(
    layers: list[LayerResult],
    scan: ScanReport,
    negative: negative_cases.NegativeCaseOutcome | None,
    modules: source_modules.SourceModuleOutcome | None,
    mode: InputMode,
) -> bool:
    """Apply the pass rule of FORMAT.md: anything unverified or found blocks."""
    if negative is not None and negative.missing:
        return False
    if scan.blocking_hit_count:
        return False
    for layer in layers:
        if not layer.ran:
            return False
        if layer.layer is not Layer.NEGATIVE_CASES and layer.findings:
            return False
    return not (mode is InputMode.BUNDLE and (modules is None or modules.status != "pass"))


def _input_files(
    run: RunInputs, scan: ScanReport, modules: source_modules.SourceModuleOutcome | None
) -> list[InputFileInfo]:
    flagged = scan.flagged_paths
    infos = [
        InputFileInfo(f.name, f.size, f.sha256, f.ok, f.name in flagged, "input")
        for f in run.all_files()
        if f.sha256
    ]
    if modules is not None:
        infos += [
            InputFileInfo(b.path, b.size, b.sha256, True, True, "source_module")
            for b in modules.bodies
        ]
    return sorted(infos, key=lambda i: i.path)
