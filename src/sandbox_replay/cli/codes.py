"""``codes``: list the finding codes, or print one code's documentation."""

from __future__ import annotations

from typing import Annotated

from sandbox_replay.cli.app import app, argument, usage_error
from sandbox_replay.model.codes import REGISTRY, Layer


@app.command("codes")
def explain_codes(
    code: Annotated[
        str | None,
        argument(help="A finding code to explain; omit to list every code."),
    ] = None,
) -> None:
    """List every finding code by layer, or print one code's full documentation.

    Writes to stdout only: the list (code, severity, one-line message), or the code's
    layer, severity and Markdown doc (what it checks, why, an example, the fix).
    Exit 0, or 2 for an unknown code.
    """
    if code is None:
        for layer in Layer:
            entries = REGISTRY.by_layer(layer)
            if not entries:
                continue
            print(f"{layer.label}:")
            for entry in entries:
                print(f"  {entry.code}  [{entry.severity.value}]  {entry.summary}")
        return
    found = REGISTRY.get(code.strip().upper())
    if found is None:
        raise usage_error(f"unknown finding code {code!r}; run 'sandbox-replay codes' to list them")
    print(found.code)
    print(f"layer: {found.layer.label}  severity: {found.severity.value}")
    print(found.summary)
    print()
    print(found.doc.strip())
