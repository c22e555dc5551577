"""Policy verdicts: the row floor, and each declared verdict against the derived one."""

from __future__ import annotations

from collections import Counter
from operator import attrgetter, ne

from sandbox_replay.checks.base import (
    LayerResult,
    RowFile,
    derived_verdicts,
    describe,
    is_nonempty,
    missing_fields,
    not_text,
    repeated,
    shared,
    strings_in,
    undeclared,
)
from sandbox_replay.load.run import POLICY_VERDICTS, SANDBOX_POLICY, RunInputs
from sandbox_replay.model import codes
from sandbox_replay.model.codes import Layer
from sandbox_replay.model.policy import VERDICTS, Derivation
from sandbox_replay.model.rows import UNSET, PolicyVerdict, rows_below_floor

FLOOR = "policy_verdict_floor"
COVERAGE = ("allow", "block", "review")
ROWS = RowFile(POLICY_VERDICTS, FLOOR, "policy_verdict")


def derivation_passes(derivation: Derivation, verdict: PolicyVerdict | None) -> bool:
    """Say whether a verdict row matches the derived verdict and cites a derived rule."""
    if verdict is None:
        return False
    refs = verdict.rule_refs
    return (
        verdict.verdict == derivation.verdict
        and isinstance(refs, list)
        and any(map(refs.__contains__, derivation.determining))  # a determining rule cited
    )


def failing_requests(run: RunInputs) -> list[tuple[str, Derivation, PolicyVerdict | None]]:
    """Return the requests, in order, whose verdict row is missing or fails its derivation:
    each with its derivation and its verdict row (None where it has none)."""
    joined = run.joined
    return [
        (request_id, derivation, verdict)
        for request_id, derivation, verdict in zip(
            joined.ids, run.derivations.values(), joined.verdicts, strict=True
        )
        if not derivation_passes(derivation, verdict)
    ]


def failing_request_set(run: RunInputs) -> set[str]:
    """Return the ids of ``failing_requests``, to look requests up in."""
    return {request_id for request_id, _, _ in shared(run, failing_requests)}


def is_rule_refs(value: object) -> bool:
    """Say whether a value is a list of rule ref strings, none empty."""
    if not isinstance(value, list):
        return False
    # A loop, not a generator in `all`: this runs for every verdict row.
    for ref in value:  # noqa: SIM110
        if not isinstance(ref, str) or not ref:
            return False
    return True


def floor_problems(
    verdict: PolicyVerdict, allowed_verdicts: set[str], policy_version: object, plain: bool
) -> list[str]:
    """Return what of the row floor a verdict row breaks; ``plain``: it meets the plain
    floor of its kind (``rows_below_floor``)."""
    problems = []
    if plain:  # every required field held, the text as text, but the refs
        missing = [] if is_nonempty(verdict.rule_refs) else ["rule_refs"]
        wrong_type = []
    else:
        missing = missing_fields(verdict, PolicyVerdict.REQUIRED)
        wrong_type = not_text(verdict, PolicyVerdict.TEXT, missing)
    if missing:
        problems.append(f"missing or empty: {describe(missing)}")
    if wrong_type:
        problems.append(f"not a string: {describe(wrong_type)}")
    declared = verdict.verdict
    if "verdict" not in missing and not (
        isinstance(declared, str) and declared in allowed_verdicts
    ):
        problems.append("verdict is not one of the policy's allowed verdicts")
    if "rule_refs" not in missing and not is_rule_refs(verdict.rule_refs):
        problems.append("rule_refs is not a list of rule ref strings")
    if verdict.pre_execution is not True:
        problems.append("pre_execution is not true")
    if verdict.body_redacted is not True:
        problems.append("body_redacted is not true")
    approval = verdict.approval_ref
    if not (approval is None or approval is UNSET or isinstance(approval, str)):
        problems.append("approval_ref is neither null nor a string")
    if (
        isinstance(policy_version, str)
        and "policy_version" not in missing
        and verdict.policy_version != policy_version
    ):
        problems.append("policy_version differs from the sandbox policy's version")
    return problems


def declared_mismatch_count(run: RunInputs) -> int:
    """Count the verdict rows whose declared verdict is not their request's derived one.

    Every row counts, a second row of one request too; a row whose request does not
    exist derives to the fail-closed verdict (FORMAT 7.5). A row that declares the
    derived verdict without citing its rule is a semantic mismatch but not counted here.
    """
    if run.joined.takes_whole(run.verdicts):
        expected = shared(run, derived_verdicts)
    else:
        fallback = run.policy.fail_closed_verdict
        expected = []
        for verdict in run.verdicts:
            request_id = verdict.request_id
            derivation = run.derivations.get(request_id) if isinstance(request_id, str) else None
            expected.append(derivation.verdict if derivation is not None else fallback)
    return sum(map(ne, map(attrgetter("verdict"), run.verdicts), expected))


def check(run: RunInputs) -> LayerResult:
    """Check each verdict row's floor, then hold every request's verdict to its derivation.

    Every row meets the floor and names a declared request, once; every request has a
    verdict row that declares its derived verdict and cites a rule that decided it; the
    declared verdicts cover allow, block and review.
    """
    if not run.files[POLICY_VERDICTS].ok:
        return LayerResult(Layer.POLICY_VERDICTS, ran=False)
    result = LayerResult(Layer.POLICY_VERDICTS)
    _check_rows(run, result)
    _check_derivations(run, result)
    declared_counts = Counter(v.verdict for v in run.verdicts if isinstance(v.verdict, str))
    lacking = [v for v in COVERAGE if not declared_counts[v]]
    if lacking:
        message = (
            f"no declared verdict is {describe(lacking)}; allow, block and review must all occur"
        )
        result.add_for_file(codes.VERDICT_COVERAGE_INCOMPLETE, message, FLOOR, POLICY_VERDICTS)
    result.counts = {
        "policy_verdict_count": len(run.verdicts),
        "allow_count": declared_counts["allow"],
        "block_count": declared_counts["block"],
        "review_count": declared_counts["review"],
        "warn_count": declared_counts["warn"],
        "derived_policy_verdict_mismatch_count": declared_mismatch_count(run),
    }
    return result


def _check_rows(run: RunInputs, result: LayerResult) -> None:
    """Hold each verdict row to its floor, and to naming a declared request once."""
    policy = run.object(SANDBOX_POLICY) or {}
    allowed = policy.get("allowed_verdicts")
    allowed_verdicts = strings_in(allowed) if isinstance(allowed, list) else set(VERDICTS)
    policy_version = policy.get("policy_version")
    below = rows_below_floor(run.verdicts.rows)
    naming_undeclared, repeating = undeclared(run, run.verdicts), repeated(run, run.verdicts)
    for position, verdict in enumerate(run.verdicts):
        plain = position not in below
        problems = floor_problems(verdict, allowed_verdicts, policy_version, plain=plain)
        request_id = verdict.request_id
        if position in repeating:
            problems.append(f"second verdict row for {request_id}; only the first is joined")
        if problems:
            message = "policy verdict " + "; ".join(problems)
            ROWS.add(result, codes.VERDICT_INVALID, message, verdict, position)
        if position in naming_undeclared:
            message = f"verdict row names request {request_id}, which no action request declares"
            ROWS.add(result, codes.VERDICT_SEMANTIC_MISMATCH, message, verdict, position)


def _check_derivations(run: RunInputs, result: LayerResult) -> None:
    """Hold each request's verdict row to the verdict and rules its derivation gives."""
    for request_id, derivation, joined in shared(run, failing_requests):
        if joined is None:
            message = f"{request_id} has no verdict row (derived verdict: {derivation.verdict})"
            result.add_for_request(codes.VERDICT_MISSING, message, FLOOR, run, request_id)
            continue
        declared = joined.verdict
        # Only a known verdict is named: anything else is the input's own text.
        declared_text = declared if declared in VERDICTS else "no usable verdict"
        if declared == derivation.verdict:
            detail = f"does not cite the derived rule {derivation.rule_ref}"
        else:
            detail = (
                f"declares {declared_text} but derives to {derivation.verdict} "
                f"by {derivation.rule_ref}"
            )
        message = f"{request_id} {detail}"
        ROWS.add(result, codes.VERDICT_SEMANTIC_MISMATCH, message, joined, subject=request_id)
