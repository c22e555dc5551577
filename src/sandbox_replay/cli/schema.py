"""``schema``: print or write the JSON Schemas of the input files and the result record."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

from sandbox_replay.cli.app import app, argument, option, progress, usage_error


@app.command("schema")
def print_schema(
    name: Annotated[
        str | None,
        argument(help="A schema to print; omit to list them."),
    ] = None,
    write: Annotated[
        Path | None,
        option(
            "--write",
            help="Write every schema as <name>.schema.json into this folder instead.",
        ),
    ] = None,
) -> None:
    """Print the JSON Schema of an input file or of the result record, or list them."""
    # Imported here: building the pydantic models slows every other command's start.
    from sandbox_replay.records.schemas import SCHEMA_MODELS, schema_bytes, write_schemas

    if write is not None:
        if write.exists() and not write.is_dir():
            raise usage_error(f"schema folder {write} is a file")
        for path in write_schemas(write):
            progress(f"wrote {path}")
        return
    if name is None:
        for known, model in SCHEMA_MODELS.items():
            print(f"{known}  {(model.__doc__ or '').strip().splitlines()[0]}")
        return
    if name not in SCHEMA_MODELS:
        raise usage_error(f"unknown schema {name!r}; run 'sandbox-replay schema' to list them")
    sys.stdout.write(schema_bytes(name).decode("ascii"))
