"""The JSON Schema of a team's policy table (``--policy FILE.json``, FORMAT 6), and its check.

Imported only when a table is read, so that pydantic is loaded only then.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Text = Annotated[str, StringConstraints(pattern=r"\S")]


Verdict = Literal["allow", "warn", "block", "review"]


class PolicyTableRule(BaseModel):
    """One rule: a risk class, the action shape it requires, and what it derives."""

    model_config = ConfigDict(extra="forbid")

    risk_class: Text
    action_kind: Text
    requested_capability: Text
    source_trust_label: Text
    verdict: Verdict
    rule_ref: Text


class PolicyTableFailClosed(BaseModel):
    """What anything unrecognised derives to: always block."""

    model_config = ConfigDict(extra="forbid")

    verdict: Literal["block"]
    rule_ref: Text


class PolicyTableFile(BaseModel):
    """A policy table given with ``--policy FILE.json``; the packaged one has this shape."""

    model_config = ConfigDict(extra="forbid")

    table_id: Text
    fail_closed: PolicyTableFailClosed
    rules: Annotated[list[PolicyTableRule], Field(min_length=1)]


def check_policy_table(document: Any) -> str | None:
    """Return what is wrong with a policy table's document (one line), or None if valid."""
    from pydantic import ValidationError

    try:
        PolicyTableFile.model_validate(document, strict=True)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the document"
        more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
        return f"{where}: {first['msg']}{more}"
    return None
