"""Policy verdicts: the row floor, and each declared verdict against the derived one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping
from itertools import chain, repeat
from operator import ne, not_, or_
from typing import Any

from sandbox_replay import codes
from sandbox_replay.codes import Layer
from sandbox_replay.inputs import SANDBOX_POLICY, RunInputs
from sandbox_replay.layers.base import (
    NO_ROW,
    FloorScan,
    Join,
    LayerResult,
    derived_verdicts,
    describe,
    join,
    missing_fields,
    not_text,
    positions,
    scan_floor,
    shared,
)
from sandbox_replay.layers.rows import VERDICT_FIELDS, VERDICT_TEXT_FIELDS
from sandbox_replay.policy import VERDICTS, Derivation

FLOOR = "policy_verdict_floor"
COVERAGE = ("allow", "block", "review")
# What the bulk pre-check reads: the text fields (the verdict among them), the two flags,
# and the rule refs and approval ref, which have rules of their own.
_SCAN_TEXT = (*VERDICT_TEXT_FIELDS, "verdict")
_SCAN_FLAGS = {"pre_execution": True, "body_redacted": True}
_SCAN_READ = ("verdict", "policy_version", "rule_refs", "approval_ref")


def derivation_passes(derivation: Derivation, verdict: Mapping[str, Any] | None) -> bool:
    """Say whether a verdict row matches the derived verdict and cites a derived rule."""
    if verdict is None:
        return False
    refs = verdict.get("rule_refs")
    return (
        verdict.get("verdict") == derivation.verdict
        and isinstance(refs, list)
        and any(ref in refs for ref in derivation.determining)
    )


def verdict_join(run: RunInputs, scan: FloorScan | None = None) -> Join:
    """Join each request to its verdict row: the declared verdict and rule refs.

    ``scan``, the verdict file's, may hold those fields already.
    """
    return join(run.verdict_by_request, run.derivations, ("verdict", "rule_refs"), scan)


def failing_requests(run: RunInputs) -> list[str]:
    """Return the requests, in order, whose verdict row is missing or fails its derivation.

    A verdict that declares the derived verdict and cites exactly ``[rule_ref]`` passes
    ``derivation_passes``; that is tested for every request at once in C, and only the
    other requests are put to ``derivation_passes`` itself.
    """
    request_ids = list(run.derivations)
    derivations = list(run.derivations.values())
    verdicts = shared(run, verdict_join)
    distinct = dict(zip(map(id, derivations), derivations, strict=True))
    cited = {key: [d.rule_ref] for key, d in distinct.items()}
    doubtful = map(
        or_,
        map(ne, verdicts.columns["verdict"], shared(run, derived_verdicts)),
        map(ne, verdicts.columns["rule_refs"], map(cited.__getitem__, map(id, derivations))),
    )
    refs = verdicts.refs
    return [
        request_ids[i]
        for i in positions(doubtful)
        if refs[i] is NO_ROW or not derivation_passes(derivations[i], refs[i].row)
    ]


def _bad_rule_refs(values: list[Any]) -> list[int]:
    """Return the positions whose rule refs are not a non-empty list of non-empty strings.

    ``list.__len__`` and ``str.__len__`` raise TypeError for any other type, so one pass
    each proves the common case where every row is plain.
    """
    try:
        if all(map(list.__len__, values)) and all(map(str.__len__, chain.from_iterable(values))):
            return []
    except TypeError:
        pass
    return [
        i
        for i, refs in enumerate(values)
        if not (type(refs) is list and refs and all(type(r) is str and r for r in refs))
    ]


def _outside(values: list[Any], allowed: Collection[Any]) -> Iterable[int]:
    """Return the positions whose (hashable) value is not in ``allowed``."""
    if set(values) <= set(allowed):
        return ()
    return positions(map(not_, map(allowed.__contains__, values)))


def declared_mismatch_count(run: RunInputs, scan: FloorScan) -> int:
    """Count the verdict rows whose declared verdict is not their request's derived one.

    Every row counts, a second row of one request too; a row whose request does not
    exist derives to the fail-closed verdict (FORMAT 7.5). A row that declares the
    derived verdict without citing its rule is a semantic mismatch but not counted here.
    ``scan``, of the verdict file, has read the verdicts and request ids (None where not
    a string, which matches no verdict and no request).
    """
    derived = {request_id: d.verdict for request_id, d in run.derivations.items()}
    fallback = repeat(run.policy.fail_closed_verdict)
    expected = map(derived.get, scan.columns["request_id"], fallback)
    return sum(map(ne, scan.columns["verdict"], expected))


def check(run: RunInputs) -> LayerResult:
    """Check each verdict row's floor, then hold every request's verdict to its derivation."""
    result = LayerResult(Layer.POLICY_VERDICTS)
    if not run.files["policy_verdicts.json"].ok:
        result.ran = False
        return result
    policy = run.object(SANDBOX_POLICY) or {}
    allowed = policy.get("allowed_verdicts")
    allowed_verdicts = (
        {v for v in allowed if isinstance(v, str)} if isinstance(allowed, list) else set(VERDICTS)
    )
    policy_version = policy.get("policy_version")
    scan = scan_floor(
        run.verdicts,
        _SCAN_TEXT,
        _SCAN_FLAGS,
        run.verdict_by_request,
        unique="request_id",
        read=_SCAN_READ,
    )
    # The scan clears the floor's text, flags and repeats; these are the verdict's own.
    request_ids = scan.columns["request_id"]
    suspects = scan.suspects.union(
        _outside(scan.columns["verdict"], allowed_verdicts),
        _bad_rule_refs(scan.columns["rule_refs"]),
        _outside(list(map(type, scan.columns["approval_ref"])), (str, type(None))),
        shared(run, verdict_join, scan).unknown(request_ids, run.request_by_id),
    )
    versions = scan.columns["policy_version"]
    if isinstance(policy_version, str) and versions.count(policy_version) != len(versions):
        suspects.update(positions(map(ne, versions, repeat(policy_version))))
    seen: set[str] = set()
    for ref in map(run.verdicts.__getitem__, sorted(suspects)):
        row = ref.row
        problems = []
        missing = missing_fields(row, VERDICT_FIELDS)
        if missing:
            problems.append(f"missing or empty: {describe(missing)}")
        wrong_type = not_text(row, VERDICT_TEXT_FIELDS, missing)
        if wrong_type:
            problems.append(f"not a string: {describe(wrong_type)}")
        verdict = row.get("verdict")
        if "verdict" not in missing and not (
            isinstance(verdict, str) and verdict in allowed_verdicts
        ):
            problems.append("verdict is not one of the policy's allowed verdicts")
        refs = row.get("rule_refs")
        if "rule_refs" not in missing and not (
            isinstance(refs, list) and all(isinstance(r, str) and r for r in refs)
        ):
            problems.append("rule_refs is not a list of rule ref strings")
        if row.get("pre_execution") is not True:
            problems.append("pre_execution is not true")
        if row.get("body_redacted") is not True:
            problems.append("body_redacted is not true")
        approval = row.get("approval_ref")
        if approval is not None and not isinstance(approval, str):
            problems.append("approval_ref is neither null nor a string")
        version = row.get("policy_version")
        if (
            isinstance(policy_version, str)
            and "policy_version" not in missing
            and (version != policy_version)
        ):
            problems.append("policy_version differs from the sandbox policy's version")
        request_id = row.get("request_id")
        if isinstance(request_id, str):
            if request_id in seen:
                problems.append(f"second verdict row for {request_id}; only the first is joined")
            seen.add(request_id)
        if problems:
            result.add_for_row(
                codes.VERDICT_INVALID,
                "policy verdict " + "; ".join(problems),
                FLOOR,
                ref,
                "request_id",
                "policy_verdict",
            )
        if isinstance(request_id, str) and request_id not in run.request_by_id:
            result.add_for_row(
                codes.VERDICT_SEMANTIC_MISMATCH,
                f"verdict row names request {request_id}, which no action request declares",
                FLOOR,
                ref,
                "request_id",
                "policy_verdict",
            )
    for request_id in shared(run, failing_requests):
        derivation = run.derivations[request_id]
        verdict_ref = run.verdict_by_request.get(request_id)
        if verdict_ref is None:
            request = run.request_by_id[request_id]
            result.add_for_row(
                codes.VERDICT_MISSING,
                f"{request_id} has no verdict row (derived verdict: {derivation.verdict})",
                FLOOR,
                request,
                "request_id",
                "action_request",
            )
            continue
        declared = verdict_ref.get("verdict")
        # Only a known verdict is named: anything else is the input's own text.
        declared_text = declared if declared in VERDICTS else "no usable verdict"
        if declared == derivation.verdict:
            detail = f"does not cite the derived rule {derivation.rule_ref}"
        else:
            detail = (
                f"declares {declared_text} but derives to {derivation.verdict} "
                f"by {derivation.rule_ref}"
            )
        result.add_for_row(
            codes.VERDICT_SEMANTIC_MISMATCH,
            f"{request_id} {detail}",
            FLOOR,
            verdict_ref,
            "request_id",
            "policy_verdict",
        )
    declared = Counter(scan.columns["verdict"])
    lacking = [v for v in COVERAGE if not declared[v]]
    if lacking:
        result.add(
            codes.VERDICT_COVERAGE_INCOMPLETE,
            f"no declared verdict is {describe(lacking)}; allow, block and review must all occur",
            FLOOR,
            "policy_verdicts",
            "input_file",
            "policy_verdicts.json",
            1,
        )
    result.counts = {
        "policy_verdict_count": len(run.verdicts),
        "allow_count": declared["allow"],
        "block_count": declared["block"],
        "review_count": declared["review"],
        "warn_count": declared["warn"],
        "derived_policy_verdict_mismatch_count": declared_mismatch_count(run, scan),
    }
    return result
