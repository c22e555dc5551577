"""Import Inspect AI evaluation logs (``.eval``) as bundle folders the replay reads.

Logs are read only through Inspect's own API (``inspect_ai.log.read_eval_log``, the
optional extra ``sandbox-replay[inspect]``), never by parsing their files here. What a
bundle holds, per tool call of a sample (README, "Replaying Inspect AI logs"; FORMAT.md):

- one action request: ``request_id`` the tool call id (prefixed with the sample and epoch
  when one bundle holds a whole log), ``episode_id`` ``<sample id>/epoch_<n>``, the shape
  from the map file (``tool_map``), refs ``inspect/<task>/<sample id>/epoch_<n>/<call id>``
  and the sha256 of the call's argument and output bodies, never the bodies;
- one verdict row when an approval event decided the call before it ran (approve and
  modify are allow, reject and terminate block, escalate review); ``pre_execution`` is
  true only when that event comes before the call's tool span in the log. No approval
  event, no verdict row: the replay reports the decision as never recorded;
- one side-effect row: the ``exec`` and ``write_file`` sandbox events inside the call's
  tool span (and the spans below it) count as executed, one diff each;
- no rollback and no cold replay, which Inspect does not record: the bundle manifest says
  so (``rollback_evidence`` / ``cold_replay_evidence``: ``not_recorded_by_harness``), and
  the replay reports each with its own code. With ``rollback_from_teardown`` every
  executed call gets a rollback row standing for the sample's sandbox teardown, and the
  manifest says ``rollback_evidence: sandbox_teardown``.

Argument, output, command and file bodies are read in memory for the classification and
the forbidden-material scan only. A call whose bodies hold forbidden material has
``secret_like_data_synthetic: false`` (an action-request finding) and
``body_forbidden_matches`` with counts by class, never the text. Nothing time-bound of a
log (timestamps, run and eval ids) reaches a bundle, so one log always imports to the
same bytes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sandbox_replay.atomic import dump_json
from sandbox_replay.importers.tool_map import ToolMap, empty_map
from sandbox_replay.load.scan import ForbiddenScanner

EXTRA_HINT = "pip install 'sandbox-replay[inspect]'"
LOG_SUFFIX = ".eval"
POLICY_ID = "policy:inspect_ai_approval"
POLICY_VERSION = "inspect_ai_approval/1"
NO_OUTPUT_REF = "tool_output:none_before_first_call"
NOT_RECORDED = "not_recorded_by_harness"
TEARDOWN = "sandbox_teardown"
MAP_MODULE_PATH = "source_modules/map/tool_map.json"
DECISION_VERDICTS = {
    "approve": "allow",
    "modify": "allow",
    "reject": "block",
    "terminate": "block",
    "escalate": "review",
}
EXECUTING_ACTIONS = ("exec", "write_file")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
# Levels of folders below a PATH searched for logs (as ``report.discover`` searches for runs).
MAX_DEPTH = 64


class InspectImportError(ValueError):
    """A log that cannot be imported, or the extra is missing; one line naming the file."""


@dataclass(frozen=True)
class ImportOptions:
    """How logs become bundles: the map, one bundle per sample or per log, the rollbacks."""

    tool_map: ToolMap = field(default_factory=empty_map)
    per_log: bool = False
    rollback_from_teardown: bool = False
    scanner: ForbiddenScanner | None = None


@dataclass(frozen=True)
class Bundle:
    """One bundle folder to write: its name and every file's bytes by relative path."""

    name: str
    files: Mapping[str, bytes]
    secret_matches: Mapping[str, int]


@dataclass
class _Call:
    """One tool call of a sample as the bundle needs it; bodies only as digests."""

    call_id: str
    function: str
    arguments: dict[str, Any]
    previous_function: str | None
    previous_output_ref: str | None
    decision: str | None
    approver: str
    pre_execution: bool
    executed_count: int
    arguments_sha256: str
    output_sha256: str
    matches: dict[str, int]


def find_logs(paths: Sequence[Path]) -> list[Path]:
    """Return the ``.eval`` files among ``paths`` and under its folders, sorted, each once.

    Folders are searched as ``build`` searches for runs (``report.discover``): with a
    stack, not recursion, never following a symbolic link, leaving out hidden folders,
    folders that cannot be listed and anything more than ``MAX_DEPTH`` levels down.
    """
    found: dict[Path, Path] = {}
    for path in paths:
        if path.is_file():
            found.setdefault(path.resolve(), path)
        elif path.is_dir():
            for log in _logs_under(path):
                found.setdefault(log.resolve(), log)
        else:
            raise InspectImportError(f"{path} does not exist")
    return sorted(found.values(), key=str)


def _logs_under(root: Path) -> Iterator[Path]:
    stack = [(root, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda entry: entry.name)
        except OSError:
            continue
        children = []
        for entry in entries:
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if depth < MAX_DEPTH:
                    children.append((folder / entry.name, depth + 1))
            elif entry.name.endswith(LOG_SUFFIX) and entry.is_file(follow_symlinks=False):
                yield folder / entry.name
        stack.extend(reversed(children))


def import_logs(logs: Sequence[Path], options: ImportOptions) -> list[Bundle]:
    """Read each log through Inspect's API and return its bundles (nothing is written)."""
    read_eval_log = _inspect_reader()
    bundles: list[Bundle] = []
    for path in logs:
        try:
            log = read_eval_log(str(path), resolve_attachments=True)
        except Exception as error:  # Inspect's own errors vary by version; name only the type
            raise InspectImportError(
                f"{path}: not an Inspect AI log this version of inspect-ai can read "
                f"({type(error).__name__})"
            ) from None
        bundles.extend(_bundles_of(path, log, options))
    names = [bundle.name for bundle in bundles]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InspectImportError(
            f"two logs or samples would both be written as {repeated[0]}; import them apart"
        )
    return bundles


def write_bundles(bundles: Iterable[Bundle], out_dir: Path) -> list[Path]:
    """Write each bundle as a folder of ``out_dir``, whole or not at all; return the folders.

    A bundle is assembled in a hidden temp folder beside its target and renamed into
    place, so an interrupted import leaves no half-written bundle. An existing folder of
    the same name is refused (``InspectImportError``), never overwritten.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    pending = list(bundles)
    for bundle in pending:
        if (out_dir / bundle.name).exists():
            raise InspectImportError(
                f"{out_dir / bundle.name} already exists; remove it or choose another --out"
            )
    for bundle in pending:
        target = out_dir / bundle.name
        staging = Path(tempfile.mkdtemp(prefix=f".{bundle.name}.new-", dir=out_dir))
        try:
            for relative, data in sorted(bundle.files.items()):
                path = staging / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                with open(path, "wb") as handle:
                    handle.write(data)
                    handle.flush()
                    os.fsync(handle.fileno())
            os.rename(staging, target)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        written.append(target)
    return written


def _inspect_reader() -> Any:
    try:
        from inspect_ai.log import read_eval_log
    except ImportError:
        raise InspectImportError(
            f"reading Inspect AI logs needs the optional extra: {EXTRA_HINT}"
        ) from None
    return read_eval_log


def _safe(text: str) -> str:
    return _UNSAFE.sub("-", text).strip("-.") or "x"


def _digest(value: Any) -> str:
    data = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(data.encode("utf-8", "surrogatepass")).hexdigest()


def _bundles_of(path: Path, log: Any, options: ImportOptions) -> list[Bundle]:
    samples = list(log.samples or [])
    if not samples:
        raise InspectImportError(f"{path}: the log holds no samples to replay")
    stem = _safe(path.name.removesuffix(LOG_SUFFIX))
    task = str(log.eval.task)
    harness_version = str((log.eval.packages or {}).get("inspect_ai", "unknown"))
    if options.rollback_from_teardown and log.eval.config.sandbox_cleanup is False:
        raise InspectImportError(
            f"{path}: the evaluation ran with sandbox cleanup off, so no teardown can stand "
            "for a rollback; import it without --rollback-from-teardown"
        )
    scanner = options.scanner or ForbiddenScanner.default()
    episodes = [
        (f"{sample.id}/epoch_{sample.epoch}", list(_calls_of(sample.events, scanner)))
        for sample in sorted(samples, key=lambda s: (str(s.id), s.epoch))
    ]
    if options.per_log:
        return [_bundle(stem, task, harness_version, episodes, options, prefixed=True)]
    return [
        _bundle(
            f"{stem}-{_safe(episode.replace('/epoch_', '-e'))}",
            task,
            harness_version,
            [(episode, calls)],
            options,
            prefixed=False,
        )
        for episode, calls in episodes
    ]


def _calls_of(events: Sequence[Any], scanner: ForbiddenScanner) -> Iterator[_Call]:
    """Yield each tool call of one sample's events, in log order.

    A call's tool span (a span of type ``tool`` named after the function) opens right
    before its tool event: Inspect records the two with no await between them
    (``inspect_ai.util.span`` and ``call_tool``), so no other event can come between, even
    for calls run concurrently. The call's sandbox events are those recorded in that span
    or in a span below it; its approval events name its call id.
    """
    from inspect_ai.event import ApprovalEvent, SandboxEvent, SpanBeginEvent, ToolEvent

    parents: dict[str, str | None] = {}
    tool_spans: dict[str, int] = {}  # tool span id -> position of its call's tool event
    approvals: dict[str, list[tuple[int, Any]]] = {}
    for at, event in enumerate(events):
        if isinstance(event, SpanBeginEvent):
            parents[event.id] = event.parent_id
        elif isinstance(event, ApprovalEvent):
            approvals.setdefault(event.call.id, []).append((at, event))
        elif isinstance(event, ToolEvent) and at > 0:
            before = events[at - 1]
            if (
                isinstance(before, SpanBeginEvent)
                and before.type == "tool"
                and before.name == event.function
            ):
                tool_spans[before.id] = at
    sandbox: dict[int, list[Any]] = {}  # tool event position -> its sandbox events
    for event in events:
        if isinstance(event, SandboxEvent):
            owner = _owning_tool_span(event.span_id, parents, tool_spans)
            if owner is not None:
                sandbox.setdefault(tool_spans[owner], []).append(event)

    linked = set(tool_spans.values())
    previous_function: str | None = None
    previous_output_ref: str | None = None
    for at, event in enumerate(events):
        if not isinstance(event, ToolEvent):
            continue
        # The call starts running when its tool span opens (or, without one, at its event).
        started = at - 1 if at in linked else at
        activity = sandbox.get(at, [])
        decided = approvals.get(event.id, [])
        position, approval = decided[-1] if decided else (None, None)
        output = event.model_dump(mode="json", include={"result", "error"})
        bodies = [
            json.dumps(event.arguments, ensure_ascii=False, default=str),
            json.dumps(output, ensure_ascii=False, default=str),
            *(
                json.dumps([e.cmd, e.file, e.input, e.output], ensure_ascii=False, default=str)
                for e in activity
            ),
            *(
                json.dumps(
                    [e.explanation, e.modified and e.modified.arguments],
                    ensure_ascii=False,
                    default=str,
                )
                for _, e in decided
            ),
        ]
        counts, _matched = scanner.scan_bytes("\n".join(bodies).encode("utf-8", "surrogatepass"))
        yield _Call(
            call_id=event.id,
            function=event.function,
            arguments=dict(event.arguments),
            previous_function=previous_function,
            previous_output_ref=previous_output_ref,
            decision=approval.decision if approval is not None else None,
            approver=approval.approver if approval is not None else "",
            pre_execution=position is not None and position < started,
            executed_count=sum(1 for e in activity if e.action in EXECUTING_ACTIONS),
            arguments_sha256=_digest(event.arguments),
            output_sha256=_digest(output),
            matches=dict(counts),
        )
        previous_function = event.function
        previous_output_ref = event.id


def _owning_tool_span(
    span_id: str | None, parents: Mapping[str, str | None], tool_spans: Mapping[str, int]
) -> str | None:
    """Return the nearest tool span at or above ``span_id`` that belongs to a call."""
    seen: set[str] = set()
    while span_id is not None and span_id not in seen:
        if span_id in tool_spans:
            return span_id
        seen.add(span_id)
        span_id = parents.get(span_id)
    return None


def _bundle(
    name: str,
    task: str,
    harness_version: str,
    episodes: Sequence[tuple[str, list[_Call]]],
    options: ImportOptions,
    *,
    prefixed: bool,
) -> Bundle:
    requests, verdicts, effects, rollbacks = [], [], [], []
    secret_matches: dict[str, int] = {}
    for episode, calls in episodes:
        for call in calls:
            request_id = f"{episode}/{call.call_id}" if prefixed else call.call_id
            ref = f"inspect/{task}/{episode}/{call.call_id}"
            shape = options.tool_map.classify(call.function, call.arguments, call.previous_function)
            for class_id, count in call.matches.items():
                secret_matches[class_id] = secret_matches.get(class_id, 0) + count
            request: dict[str, Any] = {
                "request_id": request_id,
                "episode_id": episode,
                "action_kind": shape.action_kind,
                "normalized_action_ref": ref,
                "source_trust_label": shape.source_trust_label,
                "untrusted_tool_output_ref": (
                    f"inspect/{task}/{episode}/{call.previous_output_ref}/output"
                    if call.previous_output_ref is not None
                    else NO_OUTPUT_REF
                ),
                "requested_capability": shape.requested_capability,
                "risk_class": shape.risk_class,
                "intended_side_effect_ref": f"effect:{ref}",
                "body_redacted": True,
                "secret_like_data_synthetic": not call.matches,
                "raw_payload_exported": False,
                "live_network_target": False,
                "tool_function": call.function,
                "map_rule_ref": shape.rule_ref or "map_rule:none_matched",
                "arguments_sha256": call.arguments_sha256,
                "output_sha256": call.output_sha256,
            }
            if call.matches:
                request["body_forbidden_matches"] = ", ".join(
                    f"{class_id}: {count}" for class_id, count in sorted(call.matches.items())
                )
            requests.append(request)
            if call.decision is not None:
                verdicts.append(
                    {
                        "request_id": request_id,
                        "policy_version": POLICY_VERSION,
                        "verdict": DECISION_VERDICTS.get(call.decision, call.decision),
                        "rule_refs": [f"approver:{call.approver}"],
                        "pre_execution": call.pre_execution,
                        "decision_reason_ref": f"reason:inspect_approval/{call.decision}",
                        "approval_ref": f"approval:{ref}",
                        "body_redacted": True,
                    }
                )
            executed = call.executed_count > 0
            rollback_ref = "rollback:not_required_not_executed"
            if executed and options.rollback_from_teardown:
                rollback_id = f"{TEARDOWN}:{request_id}"
                rollback_ref = rollback_id
                rollbacks.append(
                    {
                        "rollback_id": rollback_id,
                        "request_id": request_id,
                        "rollback_required": True,
                        "rollback_verified": True,
                        "rollback_command_ref": f"rollback_command:inspect/{task}/{episode}/{TEARDOWN}",
                        "body_redacted": True,
                    }
                )
            elif executed:
                rollback_ref = f"rollback:{NOT_RECORDED}"
            effects.append(
                {
                    "request_id": request_id,
                    "execution_attempted": executed,
                    "filesystem_diff_ref": f"diff:{ref}/sandbox" if executed else "diff:none",
                    "network_diff_ref": f"diff:{NOT_RECORDED}",
                    "database_diff_ref": f"diff:{NOT_RECORDED}",
                    "side_effect_diff_count": call.executed_count,
                    "rollback_receipt_ref": rollback_ref,
                    "body_redacted": True,
                }
            )
    bundle_id = f"bundle:inspect/{task}/{name}"
    files = {
        "action_requests.json": dump_json({"action_requests": requests}),
        "policy_verdicts.json": dump_json({"policy_verdicts": verdicts}),
        "side_effect_receipts.json": dump_json({"side_effect_receipts": effects}),
        "rollback_receipts.json": dump_json({"rollback_receipts": rollbacks}),
        "cold_replay.json": dump_json({"cold_replay": []}),
        "projection_protocol.json": dump_json(_projection(task, episodes, harness_version)),
        "sandbox_policy.json": dump_json(_sandbox_policy()),
        "bundle_manifest.json": dump_json(
            {
                "bundle_id": bundle_id,
                "bundle_format_ref": "format:exported_sandbox_policy_escape_bundle",
                "export_format_version": "1",
                "exporter_ref": "exporter:sandbox-replay/import-inspect",
                "source_protocol_ref": f"projection:inspect/{task}",
                "policy_ref": f"{POLICY_ID}@{POLICY_VERSION}",
                "source_module_manifest_ref": "source_module_manifest.json",
                "body_in_receipt": False,
                "harness_ref": f"harness:inspect_ai@{harness_version}",
                "rollback_evidence": TEARDOWN if options.rollback_from_teardown else NOT_RECORDED,
                "cold_replay_evidence": NOT_RECORDED,
            }
        ),
        "source_module_manifest.json": dump_json(_module_manifest(options.tool_map)),
        MAP_MODULE_PATH: options.tool_map.body,
    }
    return Bundle(_safe(name), files, secret_matches)


def _projection(
    task: str, episodes: Sequence[tuple[str, list[_Call]]], harness_version: str
) -> dict[str, Any]:
    return {
        "protocol_id": f"projection:inspect/{task}",
        "source_refs": [f"source:inspect_log/{task}/{episode}" for episode, _ in episodes],
        "source_pattern_ids": ["pattern:inspect_tool_call"],
        "projection_receipt_refs": ["receipt:projection/sandbox-replay_import_inspect"],
        "target_refs": ["target:sandbox_replay/bundle"],
        "target_symbols": [
            "action_requests",
            "policy_verdicts",
            "side_effect_receipts",
            "rollback_receipts",
            "cold_replay",
        ],
        "public_runtime_refs": [f"runtime:inspect_ai/{harness_version}"],
        "omitted_secret_or_live_access_material": [
            "tool call arguments",
            "tool outputs and errors",
            "sandbox commands, file bodies and outputs",
            "approval explanations",
            "model messages",
            "timestamps and run ids",
        ],
        "body_import_status": "metadata_only",
        "body_import_verification": {
            "verification_status": "verified",
            "method": "refs_and_sha256_digests_only",
            "verified": True,
            "body_in_receipt": False,
        },
        "body_in_receipt": False,
        "copied_credential_or_account_bound_source": False,
        "exports_secret_or_live_access_material": False,
        "exports_executable_payloads": False,
        "authorizes_live_network": False,
        "authorizes_sandbox_escape": False,
    }


def _sandbox_policy() -> dict[str, Any]:
    """Return the sandbox policy object of FORMAT section 1, claiming no authority."""
    return {
        "policy_id": POLICY_ID,
        "policy_version": POLICY_VERSION,
        "allowed_verdicts": ["allow", "warn", "block", "review"],
        "required_action_fields": [
            "request_id",
            "episode_id",
            "action_kind",
            "normalized_action_ref",
            "source_trust_label",
            "untrusted_tool_output_ref",
            "requested_capability",
            "risk_class",
            "intended_side_effect_ref",
            "body_redacted",
            "secret_like_data_synthetic",
            "raw_payload_exported",
            "live_network_target",
        ],
        "required_verdict_fields": [
            "request_id",
            "policy_version",
            "verdict",
            "rule_refs",
            "pre_execution",
            "decision_reason_ref",
            "body_redacted",
        ],
        "required_effect_fields": [
            "request_id",
            "execution_attempted",
            "filesystem_diff_ref",
            "network_diff_ref",
            "database_diff_ref",
            "side_effect_diff_count",
            "rollback_receipt_ref",
            "body_redacted",
        ],
        "live_secret_handling_authorized": False,
        "live_network_access_authorized": False,
        "host_filesystem_mutation_authorized": False,
        "tool_output_expands_authority": False,
        "executable_payload_export_authorized": False,
        "security_benchmark_claim_authorized": False,
        "provider_calls_authorized": False,
        "release_authorized": False,
    }


def _module_manifest(tool_map: ToolMap) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(tool_map.body).hexdigest()
    return {
        "manifest_id": "source_modules:inspect_tool_map",
        "source_import_class": "copied_non_secret_macro_body",
        "body_in_receipt": False,
        "body_text_in_receipt": False,
        "module_count": 1,
        "modules": [
            {
                "module_id": "module:inspect_tool_map",
                "path": MAP_MODULE_PATH,
                "material_class": "public_macro_control_plane_body",
                "source_import_class": "copied_non_secret_macro_body",
                "body_copied": True,
                "body_in_receipt": False,
                "body_text_in_receipt": False,
                "sha256": digest,
                "source_sha256": digest,
                "target_sha256": digest,
                "required_anchors": [tool_map.map_id],
            }
        ],
    }
