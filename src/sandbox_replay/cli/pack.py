"""``pack``: pack a built site into a reproducible archive listed in SHA256SUMS."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from sandbox_replay.cli.app import app, argument, option, progress, usage_errors


@app.command("pack")
def pack(
    site_dir: Annotated[Path, argument(help="The built report site folder.")],
    out: Annotated[
        Path | None,
        option(
            "--out",
            "-o",
            help="Archive to write (default: <site folder>.tar.gz beside the folder).",
        ),
    ] = None,
) -> None:
    """Pack a site built by build into a reproducible tar.gz and list it in SHA256SUMS.

    Entries are sorted, owned by 0:0 with normalised modes, and dated SOURCE_DATE_EPOCH
    (0 when unset), so packing the same site twice gives the same bytes. SHA256SUMS beside
    the archive is merged: other files' lines are kept, this archive's line replaced.
    """
    from sandbox_replay.exports.pack import (
        PackConfig,
        PackError,
        default_archive,
        pack_site,
        source_date_epoch,
    )

    with usage_errors(PackError):
        config = PackConfig(site_dir, out or default_archive(site_dir), source_date_epoch())
        written = pack_site(config)
    for path in written:
        progress(f"wrote {path}")
