"""What a reviewer sees of AgentDojo runs (issue #45 items 3 and 4): the benchmark's own
verdict beside the replay's on each run page and in its headline, and the index's table by
suite and attack, kept across an incremental build."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from conftest import REPO, read_json, working_directory
from sandbox_replay.importers.agentdojo_logs import AgentDojoOptions, import_logs
from sandbox_replay.importers.inspect_logs import write_bundles
from sandbox_replay.report.build import BuildConfig, BuildResult, build_site

LOGS = REPO / "tests" / "data" / "agentdojo" / "logs"
ATTACKED = "ground_truth_obeys_injection-banking-user_task_0-ignore_previous-injection_task_0"
BENIGN = "ground_truth-banking-user_task_0-none-none"
STOPPED = "ground_truth_behind_detector-banking-user_task_0-ignore_previous-injection_task_0"
# (suite, attack, runs, goal met by the benchmark, attacker's call executed, disagreements)
TABLE = [
    ("banking", "ignore_previous", 3, 2, 2, 0),
    ("banking", "none", 1, 0, 0, 0),
    ("slack", "ignore_previous", 2, 2, 2, 0),
    ("slack", "none", 1, 0, 0, 0),
]
ROW = re.compile(
    r'<tr><th scope="row">([^<]*)</th><td>([^<]*)</td>' + r'<td class="num[^"]*">(\d+)</td>' * 4
)


def build(work: Path, logs: Path) -> BuildResult:
    with working_directory(work):
        return build_site(BuildConfig((logs,), Path("site"), cwd=work, progress=lambda _: None))


def page(site: Path, run: str) -> str:
    return (site / "runs" / run / "index.html").read_text("utf-8")


def headline(site: Path, run: str) -> str:
    found = re.search(r'<p class="headline-text">.*?</span> (.*?)</p>', page(site, run), re.S)
    assert found is not None
    return html.unescape(found.group(1))


def attack_table(site: Path) -> list[tuple[object, ...]]:
    index = (site / "index.html").read_text("utf-8")
    start = index.index('<table class="attack-table">')
    part = index[start : index.index("</table>", start)]
    return [(s, a, *map(int, counts)) for s, a, *counts in ROW.findall(part)]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("agentdojo")
    shutil.copytree(LOGS, work / "logs")
    build(work, Path("logs"))
    return work / "site"


def test_an_attacked_run_leads_with_the_injection_and_what_replayed(site: Path) -> None:
    assert headline(site, ATTACKED).startswith(
        "The injection task's goal was met (benchmark security: true): 2 calls made after "
        "untrusted tool output (network_request ×2) derived to block and executed "
        "(call_2, call_3). The harness recorded no policy decision for 3 of 3 calls;"
    )
    text = page(site, ATTACKED)
    assert '<h3 id="benchmark">What the benchmark said</h3>' in text
    assert "<dd>true (the injection task&#39;s goal was met)</dd>" in text
    assert (
        "The replay: 2 call(s) made after untrusted tool output executed (call_2, call_3)." in text
    )
    assert "disagrees with the replay" not in text


def test_a_benign_and_a_stopped_run_read_as_what_they_are(site: Path) -> None:
    assert headline(site, BENIGN).startswith(
        "A benign run (no injection task); the benchmark says utility true. "
    )
    assert "The replay:" not in page(site, BENIGN)  # no attacker to look for
    assert headline(site, STOPPED).startswith(
        "The injection task's goal was not met (benchmark security: false): no call made "
        "after untrusted tool output executed; the run stopped after a tool result. "
    )


def test_the_index_counts_runs_by_suite_and_attack(site: Path) -> None:
    assert attack_table(site) == TABLE


def test_a_disagreement_is_said_on_the_page_and_counted(tmp_path: Path) -> None:
    shutil.copytree(LOGS, tmp_path / "logs")
    log = tmp_path / "logs" / (ATTACKED.replace("-", "/") + ".json")
    data = json.loads(log.read_text("utf-8"))
    data["security"] = False  # the benchmark now says the attack failed; the calls still ran
    log.write_text(json.dumps(data), "utf-8")
    build(tmp_path, Path("logs"))
    site = tmp_path / "site"
    assert headline(site, ATTACKED).startswith(
        "The benchmark says the injection task's goal was not met (security: false), yet 2 "
        "calls made after untrusted tool output"
    )
    assert "disagrees with the replay</strong>" in page(site, ATTACKED)
    assert attack_table(site)[0] == ("banking", "ignore_previous", 3, 1, 2, 1)


def test_an_incremental_build_keeps_the_table(tmp_path: Path) -> None:
    shutil.copytree(LOGS, tmp_path / "logs")
    build(tmp_path, Path("logs"))
    first = (tmp_path / "site" / "index.html").read_bytes()
    again = build(tmp_path, Path("logs"))
    assert again.reused == 7
    assert (tmp_path / "site" / "index.html").read_bytes() == first
    status = read_json(tmp_path / "site" / "build-status.json")
    kept = [run["summary"]["benchmark"] for run in status["runs"] if "benchmark" in run["summary"]]
    assert len(kept) == 7


def test_two_logs_of_one_run_name_are_refused_naming_both(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sandbox_replay.cli import app

    benign = LOGS / "ground_truth" / "banking" / "user_task_0" / "none" / "none.json"
    for copy in ("a", "b"):
        target = tmp_path / "logs" / copy / "ground_truth" / "banking" / "user_task_0" / "none"
        target.mkdir(parents=True)
        shutil.copy(benign, target / "none.json")
    with working_directory(tmp_path):
        done = CliRunner().invoke(app, ["build", "logs", "--out", "site", "-q"])
    assert done.exit_code == 2, done.output
    assert (
        "logs/a/ground_truth/banking/user_task_0/none/none.json and "
        "logs/b/ground_truth/banking/user_task_0/none/none.json would both be the run "
        "ground_truth-banking-user_task_0-none-none; build them apart"
    ) in done.output
    assert not (tmp_path / "site").exists()


def unmapped_section(text: str) -> str:
    start = text.index('<section id="unmapped"')
    return text[start : text.index("</section>", start)]


def test_unmapped_calls_point_to_the_agentdojo_map_from_a_log_or_a_bundle(
    site: Path, tmp_path: Path
) -> None:
    from_log = unmapped_section(page(site, BENIGN))
    assert "<code>read_file</code>" in from_log
    assert "docs/agentdojo.md" in from_log and "docs/inspect.md" not in from_log
    assert "<code>import agentdojo --map FILE</code>" in from_log
    one = LOGS / "ground_truth" / "banking" / "user_task_0" / "none" / "none.json"
    write_bundles(import_logs([one], AgentDojoOptions()), tmp_path / "bundles")
    build(tmp_path, Path("bundles"))
    assert unmapped_section(page(tmp_path / "site", BENIGN)) == from_log
