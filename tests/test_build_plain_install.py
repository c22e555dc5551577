"""Installed with no extras, ``build`` over the fixtures builds every run it can read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import REPO
from sandbox_replay.importers.inspect_logs import EXTRA_HINT

# Run before the command line: ``inspect_ai`` cannot be imported, as with no extras.
NO_EXTRA = "import sys; sys.modules['inspect_ai'] = None; sys.modules['inspect_ai.log'] = None; "
HINT = EXTRA_HINT.replace("'", "&#39;")


def _python(program: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_EXTRA + program, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=REPO,
    )


def test_the_log_is_a_run_that_could_not_be_read(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = _python("from sandbox_replay.cli import main; main()", "build", "--out", str(site))
    assert done.returncode == 3, done.stderr  # EXIT_INCOMPLETE: built, but not every run
    assert (
        f"not read fixtures/inspect/example.eval: reading Inspect AI logs needs the optional extra: {EXTRA_HINT}"
        in done.stderr
    )
    index = (site / "index.html").read_text()
    row = next(line for line in index.splitlines() if 'href="runs/example/index.html"' in line)
    assert "Not run" in index.split(row)[1].split("</tr>")[0]
    assert f"could not be read: reading Inspect AI logs needs the optional extra: {HINT}" in index
    blocked = index.count('<tr data-status="blocked"')
    assert f"<dt>Blocked</dt><dd>{blocked}</dd>" in index  # the unread log is not counted
    assert "<dt>Not run</dt><dd>1</dd>" in index
    page = (site / "runs" / "example" / "index.html").read_text()
    assert HINT in page and "fixtures/inspect/example.eval" in page
    manifest = json.loads((site / "manifest.json").read_bytes())
    names = [run["name"] for run in manifest["runs"]]
    assert "example" not in names and len(names) == 10
    (build,) = json.loads((site / "history.json").read_bytes())["builds"]
    assert build["runs"] == 10 and build["passed"] + build["blocked"] == 10  # nor the log here
    for name in names:
        assert (site / "runs" / name / "result.json").is_file()


def test_the_build_result_says_it_is_incomplete(tmp_path: Path) -> None:
    program = (
        "from pathlib import Path; from sandbox_replay.report.build import BuildConfig, build_site; "
        "r = build_site(BuildConfig((Path('fixtures'),), Path(sys.argv[1]), progress=print)); "
        "print(r.incomplete, len(r.runs), [(u.name, u.reason) for u in r.unread])"
    )
    done = _python(program, str(tmp_path / "site"))
    assert done.returncode == 0, done.stderr
    last = done.stdout.strip().splitlines()[-1]
    reason = f"reading Inspect AI logs needs the optional extra: {EXTRA_HINT}"
    assert last == f"True 10 [('example', {reason!r})]"


def test_a_log_alone_is_still_an_error_naming_the_extra(tmp_path: Path) -> None:
    log = "fixtures/inspect/example.eval"
    done = _python(
        "from sandbox_replay.cli import main; main()", "build", log, "--out", str(tmp_path / "s")
    )
    assert done.returncode == 2
    assert EXTRA_HINT in done.stderr and not (tmp_path / "s").exists()
