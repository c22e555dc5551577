"""Inspect AI logs, made here by running small tasks offline, import and replay exactly.

Each log is written by ``fixtures/inspect/make_log.py`` in a child process: the mock
model with scripted tool calls, the local sandbox, and an auto approver that approves
``bash`` and ``save_note`` and rejects ``python`` (or no approval policy at all). Nothing
here imitates the log format: the logs are Inspect's own.
"""

from __future__ import annotations

import filecmp
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import FIXTURES, read_json, working_directory
from sandbox_replay import InputMode, ReplayConfig, replay
from sandbox_replay.importers.inspect_logs import (
    ImportOptions,
    InspectImportError,
    find_logs,
    import_logs,
    write_bundles,
)
from sandbox_replay.importers.tool_map import (
    MapFileError,
    empty_map,
    packaged_map,
    read_tool_map,
)
from sandbox_replay.model import codes
from sandbox_replay.report.build import BuildConfig, build_site

MAKE_LOG = FIXTURES / "inspect" / "make_log.py"
TOOL_MAP = FIXTURES / "inspect" / "tool_map.json"
FAIL_CLOSED = "rule:sandbox_policy_fail_closed_unrecognized_action"
# Text of the call bodies in make_log.py: none of it may reach a bundle.
BODIES = ["ls -a", "curl", "127.0.0.1", "print(2 + 2)", "replay me", "note.txt", "Automatic"]


def make_log(out: Path, *flags: str) -> Path:
    done = subprocess.run(
        [sys.executable, str(MAKE_LOG), str(out), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inspect_logs")
    return {
        "approval": make_log(folder / "approval" / "demo.eval"),
        "none": make_log(folder / "none" / "unapproved.eval", "--no-approval"),
        "secret": make_log(folder / "secret" / "leak.eval", "--with-secret"),
        "modify": make_log(folder / "modify" / "renamed.eval", "--modify"),
    }


def imported(log: Path, out: Path, **options: object) -> Path:
    settings = ImportOptions(read_tool_map(TOOL_MAP), **options)  # type: ignore[arg-type]
    (folder,) = write_bundles(import_logs([log], settings), out)
    return folder


def findings(folder: Path) -> list[tuple[str, str]]:
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    assert outcome.status == "blocked"
    return sorted((f.error_code, f.subject_id) for f in outcome.findings)


def rows(folder: Path, name: str) -> dict[str, dict[str, object]]:
    data = read_json(folder / f"{name}.json")[name]
    return {row["request_id"]: row for row in data}


def test_an_approved_log_replays_to_exactly_its_findings(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    folder = imported(logs["approval"], tmp_path)
    assert folder.name == "demo-agent_run-e1"
    requests = rows(folder, "action_requests")
    assert list(requests) == ["call_list", "call_fetch", "call_python", "call_note"]
    # The map: curl after a bash output is exfiltration from untrusted output, save_note a
    # trusted fixture write; `ls` and python match no rule.
    shapes = {
        rid: (r["action_kind"], r["requested_capability"], r["risk_class"], r["source_trust_label"])
        for rid, r in requests.items()
    }
    assert shapes == {
        "call_list": ("bash", "unclassified", "unclassified", "model_generated"),
        "call_fetch": (
            "network_request",
            "outbound_network",
            "network_exfiltration",
            "untrusted_tool_output",
        ),
        "call_python": ("python", "unclassified", "unclassified", "model_generated"),
        "call_note": (
            "filesystem_write",
            "public_fixture_write",
            "low_risk_public_fixture_mutation",
            "trusted_user_request",
        ),
    }
    assert requests["call_fetch"]["untrusted_tool_output_ref"] == (
        "inspect/containment_demo/agent_run/epoch_1/call_list/output"
    )
    verdicts = rows(folder, "policy_verdicts")
    assert {rid: (v["verdict"], v["pre_execution"]) for rid, v in verdicts.items()} == {
        "call_list": ("allow", True),
        "call_fetch": ("allow", True),
        "call_python": ("block", True),
        "call_note": ("allow", True),
    }
    effects = rows(folder, "side_effect_receipts")
    assert {
        rid: (e["execution_attempted"], e["side_effect_diff_count"]) for rid, e in effects.items()
    } == {
        "call_list": (True, 1),
        "call_fetch": (True, 1),
        "call_python": (False, 0),
        "call_note": (True, 1),
    }
    assert findings(folder) == sorted(
        [
            # Run floors a single sample cannot meet, and the harness's two gaps.
            (codes.ACTION_RISK_COVERAGE_LOW, "action_requests"),
            (codes.VERDICT_COVERAGE_INCOMPLETE, "policy_verdicts"),
            (codes.ROLLBACK_RECEIPTS_INSUFFICIENT, "rollback_receipts"),
            (codes.HARNESS_ROLLBACK_NOT_RECORDED, "rollback_evidence"),
            (codes.HARNESS_COLD_REPLAY_NOT_RECORDED, "cold_replay_evidence"),
            # The approver allowed what the policy blocks, and it ran.
            (codes.VERDICT_SEMANTIC_MISMATCH, "call_list"),
            (codes.SIDE_EFFECT_SEMANTIC_MISMATCH, "call_list"),
            (codes.VERDICT_SEMANTIC_MISMATCH, "call_fetch"),
            (codes.SIDE_EFFECT_SEMANTIC_MISMATCH, "call_fetch"),
            # The rejected call agrees with the block but cites no policy rule.
            (codes.VERDICT_SEMANTIC_MISMATCH, "call_python"),
            # The allowed note agrees with the allow but cites no policy rule.
            (codes.VERDICT_SEMANTIC_MISMATCH, "call_note"),
            # Every executed call lacks a rollback, every call a cold replay.
            *(
                (codes.ROLLBACK_RECEIPT_MISSING, c)
                for c in ("call_list", "call_fetch", "call_note")
            ),
            *(
                (codes.TRACE_ROLLBACK_REF_MISSING, f"span:{c}")
                for c in ("call_list", "call_fetch", "call_note")
            ),
            *((codes.COLD_REPLAY_MISSING, c) for c in requests),
            *((codes.TRACE_COLD_REPLAY_REF_MISSING, f"span:{c}") for c in requests),
        ]
    )
    outcome = replay(ReplayConfig(folder, InputMode.BUNDLE))
    derived = {rid: (d.verdict, d.rule_ref) for rid, d in outcome.run.derivations.items()}
    assert derived == {
        "call_list": ("block", FAIL_CLOSED),
        "call_fetch": ("block", "rule:no_live_network_from_untrusted_context"),
        "call_python": ("block", FAIL_CLOSED),
        "call_note": ("allow", "rule:public_fixture_write_with_diff_receipt"),
    }


def test_calls_without_an_approval_have_no_verdict_row(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    folder = imported(logs["none"], tmp_path)
    assert rows(folder, "policy_verdicts") == {}
    effects = rows(folder, "side_effect_receipts")
    # With no approver, python runs too.
    assert {rid: e["execution_attempted"] for rid, e in effects.items()} == {
        "call_list": True,
        "call_fetch": True,
        "call_python": True,
        "call_note": True,
    }
    found = findings(folder)
    missing = sorted(subject for code, subject in found if code == codes.VERDICT_MISSING)
    assert missing == sorted(effects)
    assert (codes.SIDE_EFFECT_SEMANTIC_MISMATCH, "call_python") in found


def test_no_body_leaves_the_log_and_a_secret_is_counted_not_written(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    folder = imported(logs["secret"], tmp_path)
    # The copied map file (source_modules/) holds the team's own patterns, not call bodies.
    records = [p for p in sorted(folder.rglob("*.json")) if "source_modules" not in p.parts]
    written = b"".join(path.read_bytes() for path in records)
    for body in [*BODIES, "SYNTHETIC_PROVIDER_PAYLOAD_BODY_SENTINEL"]:
        assert body.encode() not in written, body
    leak = rows(folder, "action_requests")["call_leak"]
    assert leak["secret_like_data_synthetic"] is False
    assert leak["body_forbidden_matches"] == "forbidden_content_body: 4"
    assert str(leak["arguments_sha256"]).startswith("sha256:")
    others = [r for rid, r in rows(folder, "action_requests").items() if rid != "call_leak"]
    assert all(r["secret_like_data_synthetic"] is True for r in others)
    assert (codes.ACTION_REQUEST_INVALID, "call_leak") in findings(folder)


def body_digest(value: object) -> str:
    """The digest docs/inspect.md states: sha256 of the compact JSON, keys sorted."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def test_a_modified_call_is_allowed_and_judged_by_what_ran(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    folder = imported(logs["modify"], tmp_path)
    verdict = rows(folder, "policy_verdicts")["call_note"]
    assert (verdict["verdict"], verdict["decision_reason_ref"]) == (
        "allow",
        "reason:inspect_approval/modify",
    )
    # The digest is of the arguments the approver chose, which are the ones that ran.
    ran = {"name": "approved_note.txt", "text": "replay me"}
    proposed = {"name": "note.txt", "text": "replay me"}
    digest = rows(folder, "action_requests")["call_note"]["arguments_sha256"]
    assert digest == body_digest(ran) != body_digest(proposed)
    effect = rows(folder, "side_effect_receipts")["call_note"]
    assert (effect["execution_attempted"], effect["side_effect_diff_count"]) == (True, 1)


def test_teardown_stands_for_the_rollbacks_when_asked(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    folder = imported(logs["approval"], tmp_path, rollback_from_teardown=True)
    rollbacks = read_json(folder / "rollback_receipts.json")["rollback_receipts"]
    assert [r["rollback_id"] for r in rollbacks] == [
        "sandbox_teardown:call_list",
        "sandbox_teardown:call_fetch",
        "sandbox_teardown:call_note",
    ]
    assert read_json(folder / "bundle_manifest.json")["rollback_evidence"] == "sandbox_teardown"
    found = {code for code, _ in findings(folder)}
    assert codes.HARNESS_ROLLBACK_NOT_RECORDED not in found
    assert codes.ROLLBACK_RECEIPT_MISSING not in found
    assert codes.ROLLBACK_RECEIPTS_INSUFFICIENT not in found
    assert codes.HARNESS_COLD_REPLAY_NOT_RECORDED in found


def test_one_bundle_per_log_prefixes_request_ids(logs: dict[str, Path], tmp_path: Path) -> None:
    folder = imported(logs["approval"], tmp_path, per_log=True)
    assert folder.name == "demo"
    assert next(iter(rows(folder, "action_requests"))) == "agent_run/epoch_1/call_list"


def test_import_is_the_same_bytes_for_a_log_made_again(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    again = make_log(tmp_path / "again" / "demo.eval")
    assert again.read_bytes() != logs["approval"].read_bytes()  # new timestamps and ids
    first = imported(logs["approval"], tmp_path / "one")
    second = imported(again, tmp_path / "two")
    compared = filecmp.dircmp(first, second)
    assert compared.diff_files == [] and compared.left_only == [] and compared.right_only == []
    for path in first.rglob("*"):
        if path.is_file():
            assert path.read_bytes() == (second / path.relative_to(first)).read_bytes()


def test_a_site_built_from_logs_equals_one_built_from_imported_folders(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    quiet = lambda _message: None  # noqa: E731
    options = ImportOptions(read_tool_map(TOOL_MAP))
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    for name in ("approval", "none"):
        (work / "logs" / logs[name].name).write_bytes(logs[name].read_bytes())
    with working_directory(work):
        write_bundles(import_logs(find_logs([Path("logs")]), options), Path("imported"))
        build_site(
            BuildConfig(
                (Path("logs"),),
                Path("from_logs"),
                cwd=work,
                progress=quiet,
                jobs=1,
                inspect=options,
            )
        )
        build_site(
            BuildConfig((Path("imported"),), Path("from_folders"), cwd=work, progress=quiet, jobs=1)
        )
    a, b = work / "from_logs", work / "from_folders"
    files = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    assert "runs/demo-agent_run-e1/index.html" in files
    sources = {
        "logs/demo.eval": "imported/demo-agent_run-e1",
        "logs/unapproved.eval": "imported/unapproved-agent_run-e1",
    }
    for name in files:
        left, right = (a / name).read_bytes(), (b / name).read_bytes()
        if name in ("manifest.json", "sandbox-replay-site.json", "build-status.json"):
            continue  # they name each run's source, checked below
        if name.endswith("/index.html") and name.startswith("runs/"):
            # The page names where the run came from (and how to reproduce it), no more.
            differing = [
                (x, y) for x, y in zip(left.splitlines(), right.splitlines(), strict=True) if x != y
            ]
            assert len(differing) == 3, name
            log = next(log for log, folder in sources.items() if folder in right.decode())
            for x, y in differing:
                assert log in x.decode() and sources[log] in y.decode(), (x, y)
            continue
        assert left == right, name
    manifest = read_json(a / "manifest.json")
    by_name = {run["name"]: run for run in manifest["runs"]}
    run = by_name["demo-agent_run-e1"]
    assert run["source_path"] == "logs/demo.eval"
    assert run["source_sha256"].startswith("sha256:") and len(run["source_sha256"]) == 71
    plain = read_json(b / "manifest.json")["runs"]
    assert [r["input_digests"] for r in plain] == [r["input_digests"] for r in manifest["runs"]]
    assert [r["result_sha256"] for r in plain] == [r["result_sha256"] for r in manifest["runs"]]


def test_the_built_in_example_log_imports(tmp_path: Path) -> None:
    logs = find_logs([FIXTURES])
    assert [log.name for log in logs] == ["example.eval"]
    (bundle,) = import_logs(logs, ImportOptions(empty_map()))
    assert bundle.name == "example-agent_run-e1"
    data = json.loads(bundle.files["action_requests.json"])["action_requests"]
    assert [row["request_id"] for row in data] == [
        "call_list",
        "call_fetch",
        "call_python",
        "call_note",
    ]
    assert {row["risk_class"] for row in data} == {"unclassified"}


def run_cli(
    *args: str, cwd: Path | None = None, code: str = ""
) -> subprocess.CompletedProcess[str]:
    program = code + "from sandbox_replay.cli import main; main()"
    return subprocess.run(
        [sys.executable, "-c", program, *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=cwd,
    )


def test_the_command_imports_and_refuses_an_existing_bundle(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    done = run_cli(
        "import",
        "inspect",
        str(logs["approval"]),
        "--out",
        str(tmp_path / "out"),
        "--map",
        str(TOOL_MAP),
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / "demo-agent_run-e1" / "bundle_manifest.json").is_file()
    again = run_cli("import", "inspect", str(logs["approval"]), "--out", str(tmp_path / "out"))
    assert again.returncode == 2
    assert "already exists" in again.stderr and "Traceback" not in again.stderr
    replayed = run_cli(
        "run-sandbox-bundle",
        "--input",
        str(tmp_path / "out" / "demo-agent_run-e1"),
        "--out",
        str(tmp_path / "result"),
        "-q",
    )
    assert replayed.returncode == 1


def test_without_the_extra_the_command_says_how_to_install_it(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    hide = "import sys; sys.modules['inspect_ai'] = None; sys.modules['inspect_ai.log'] = None; "
    done = run_cli(
        "import", "inspect", str(logs["approval"]), "--out", str(tmp_path / "out"), code=hide
    )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "sandbox-replay: error: reading Inspect AI logs needs the optional extra: "
        "pip install 'sandbox-replay[inspect]'"
    ]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_file_that_is_not_a_log_is_a_usage_error(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.eval"
    bogus.write_bytes(b"not a zip")
    done = run_cli("import", "inspect", str(bogus), "--out", str(tmp_path / "out"))
    assert done.returncode == 2
    assert f"{bogus}: not an Inspect AI log" in done.stderr
    built = run_cli("build", str(bogus), "--out", str(tmp_path / "site"))
    assert built.returncode == 2 and "Traceback" not in built.stderr


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("[]", "the top level is not an object"),
        ('{"map_id": "m", "rules": [], "extra": 1}', "unknown key(s) extra"),
        ('{"map_id": "m", "rules": [{"rule_id": "r"}]}', "rules[0].action_kind is missing"),
        (
            '{"map_id": "m", "rules": [{"rule_id": "r", "function": {"regex": "("}, '
            '"action_kind": "a", "requested_capability": "c", "risk_class": "k"}]}',
            "rules[0].function.regex is not a pattern RE2 accepts",
        ),
        ('{"map_id": "m", "map_id": "n", "rules": []}', 'key "map_id" appears twice'),
        ('{"map_id": "m",\n "rules": [}', ":2: not valid JSON"),
    ],
)
def test_a_bad_map_file_is_refused_naming_the_file(
    tmp_path: Path, document: str, message: str
) -> None:
    path = tmp_path / "map.json"
    path.write_text(document, "utf-8")
    with pytest.raises(MapFileError, match=r"map file .*map\.json") as error:
        read_tool_map(path)
    assert message in str(error.value)
    done = run_cli(
        "import", "inspect", str(tmp_path), "--out", str(tmp_path / "out"), "--map", str(path)
    )
    assert done.returncode == 2 and message in done.stderr


def test_the_map_matches_by_glob_regex_and_previous_output(tmp_path: Path) -> None:
    path = tmp_path / "map.json"
    path.write_text(
        json.dumps(
            {
                "map_id": "map:t",
                "rules": [
                    {
                        "rule_id": "net",
                        "function": "ba*",
                        "arguments": {"command": {"glob": ["curl *", "wget *"]}},
                        "action_kind": "network_request",
                        "requested_capability": "outbound_network",
                        "risk_class": "network_exfiltration",
                        "follows_output_of": ["python"],
                    },
                    {
                        "rule_id": "code",
                        "function": {"regex": "^python$"},
                        "arguments": {"timeout": "3*"},
                        "action_kind": "shell_command",
                        "requested_capability": "shell_exec",
                        "risk_class": "escape_payload_obfuscation",
                        "source_trust_label": "untrusted_tool_output",
                    },
                ],
            }
        ),
        "utf-8",
    )
    tool_map = read_tool_map(path)
    fetch = tool_map.classify("bash", {"command": "wget x"}, "python")
    assert (fetch.risk_class, fetch.source_trust_label, fetch.rule_ref) == (
        "network_exfiltration",
        "untrusted_tool_output",
        "map:t#net",
    )
    assert tool_map.classify("bash", {"command": "wget x"}, "bash").source_trust_label == (
        "model_generated"
    )
    assert tool_map.classify("bash", {"command": "echo curl x"}, None).risk_class == "unclassified"
    assert (
        tool_map.classify("python", {"timeout": 30}, None).risk_class
        == "escape_payload_obfuscation"
    )
    assert tool_map.classify("python", {}, None).risk_class == "unclassified"


def test_a_folder_without_logs_is_a_usage_error(tmp_path: Path) -> None:
    done = run_cli("import", "inspect", str(tmp_path), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and "no .eval log found" in done.stderr
    with pytest.raises(InspectImportError, match="does not exist"):
        find_logs([tmp_path / "missing"])


def test_find_logs_finds_logs_in_subfolders_past_hidden_folders_and_links(
    tmp_path: Path,
) -> None:
    for relative in ["b/two.eval", "a/c/one.eval", "a/zero.eval", ".hidden/x.eval", "a/x.json"]:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / relative).write_text("{}")
    (tmp_path / "linked").symlink_to(tmp_path / "b")
    (tmp_path / "a" / "link.eval").symlink_to(tmp_path / "b" / "two.eval")
    found = find_logs([tmp_path, tmp_path / "b" / "two.eval"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == [
        "a/c/one.eval",
        "a/zero.eval",
        "b/two.eval",
    ]


def test_verify_imports_the_logs_again_and_sees_a_changed_map(
    logs: dict[str, Path], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "demo.eval").write_bytes(logs["approval"].read_bytes())
    (work / "map.json").write_bytes(TOOL_MAP.read_bytes())
    built = run_cli("build", "logs", "--map", "map.json", "--out", "site", "-j", "1", cwd=work)
    assert built.returncode == 0, built.stderr
    manifest = read_json(work / "site" / "manifest.json")
    assert manifest["inspect_import"]["map"]["path"] == "map.json"
    assert manifest["inspect_import"]["packaged_map"] == {
        "map_id": "map:inspect_standard_tools",
        "sha256": packaged_map().sha256,
    }
    assert "agentdojo_packaged_map" not in manifest["inspect_import"]  # no AgentDojo log
    verified = run_cli("verify", "site", cwd=work)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    (work / "map.json").write_text('{"map_id": "map:other", "rules": []}', "utf-8")
    changed = run_cli("verify", "site", cwd=work)
    assert changed.returncode == 1
    assert "map file changed since the site was built: map.json" in changed.stdout


def test_exports_locate_findings_of_a_log_at_the_log(logs: dict[str, Path], tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "logs").mkdir(parents=True)
    (work / "logs" / "demo.eval").write_bytes(logs["approval"].read_bytes())
    built = run_cli(
        "build", "logs", "--out", "site", "--sarif", "out/replay.sarif", "--root", ".", cwd=work
    )
    assert built.returncode == 0, built.stderr
    assert "outside" not in built.stderr
    sarif = read_json(work / "out" / "replay.sarif")
    uris = {
        location["physicalLocation"]["artifactLocation"]["uri"]
        for run in sarif["runs"]
        for result in run["results"]
        for location in result["locations"]
    }
    assert uris == {"logs/demo.eval"}
    messages = [r["message"]["text"] for run in sarif["runs"] for r in run["results"]]
    assert any("(imported as policy_verdicts.json:" in text for text in messages)
