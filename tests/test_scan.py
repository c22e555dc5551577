"""Forbidden-material scan: every class hits, near-misses don't, counts are exact.

A credential glued into an id (``req_<token>_tail``) is found too, and the project's own
fixtures and code docs scan clean. Credential-shaped strings are assembled at run time so
that this file holds none.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import EXPORTED_BUNDLE, REPO
from sandbox_replay.checks.pipeline import _chunk_ends, _ScanCollector
from sandbox_replay.cli import app
from sandbox_replay.load.scan import (
    ForbiddenClass,
    ForbiddenClassesError,
    ForbiddenScanner,
    ScanReport,
    load_forbidden_classes,
)
from sandbox_replay.records.build import REDACTED, redact

_ALNUM = "aB3dE5fG7hJ9kL2mN4pQ6rS8tU0vW1xYz"
_HEX = "0123456789abcdef"


def _fill(alphabet: str, length: int) -> str:
    """Return a deterministic, random-looking run of ``alphabet``."""
    return "".join(random.Random(f"{alphabet}{length}").choices(alphabet, k=length))


def _sentinel(class_id: str, index: int = 0) -> str:
    table = {c.class_id: c for c in load_forbidden_classes()}
    return table[class_id].tokens[index]


# One or more planted examples per credential class; sentinels come from the table itself.
_CREDENTIAL_EXAMPLES: dict[str, list[str]] = {
    "aws_access_key_id": ["AK" + "IA" + "IOSFODNN7EXAMPLE", "AS" + "IA" + "Q3EGUQ2CZD7XLMNV"],
    "aws_secret_access_key": [
        '"aws_secret' + '_access_key": "' + _fill(_ALNUM + "/+", 40) + '"',
        "AWS_SECRET" + "_KEY=" + _fill(_ALNUM, 40),
    ],
    "github_token": [
        "gh" + "p_" + _fill(_ALNUM, 36),
        "gh" + "s_" + _fill(_ALNUM, 36),
        "github" + "_pat_" + _fill(_ALNUM, 22) + "_" + _fill(_ALNUM, 59),
    ],
    "gitlab_token": ["gl" + "pat-" + _fill(_ALNUM + "_-", 20), "gl" + "dt-" + _fill(_ALNUM, 24)],
    "slack_token": [
        "xo" + "xb-" + "1234567890-0987654321-" + _fill(_ALNUM, 24),
        "xa" + "pp-1-A0123ABCDEF-1234567890123-" + _fill(_HEX, 64),
        "https://hooks.slack.com/services/" + "T0123ABCD/B0123ABCD/" + _fill(_ALNUM, 24),
    ],
    "stripe_live_key": ["sk" + "_live_" + _fill(_ALNUM, 24), "rk" + "_live_" + _fill(_ALNUM, 99)],
    "openai_api_key": [
        "sk-" + "proj-" + _fill(_ALNUM + "_-", 120),
        "sk-" + _fill(_ALNUM, 20) + "T3Blbk" + "FJ" + _fill(_ALNUM, 20),
    ],
    "anthropic_api_key": ["sk-" + "ant-" + "api03-" + _fill(_ALNUM + "_-", 93)],
    "google_api_credential": [
        "AI" + "za" + _fill(_ALNUM + "_-", 35),
        "GOC" + "SPX-" + _fill(_ALNUM, 28),
        "ya" + "29." + _fill(_ALNUM, 120),
    ],
    "private_key_block": [
        "-----BEGIN " + "RSA PRIVATE KEY-----",
        "-----BEGIN " + "PRIVATE KEY-----",
        "-----BEGIN " + "OPENSSH PRIVATE KEY-----",
        "-----BEGIN " + "PGP PRIVATE KEY BLOCK-----",
        "PuTTY-User" + "-Key-File-3: ssh-ed25519",
        "AGE-SECRET" + "-KEY-1" + _fill("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58),
    ],
    "json_web_token": [
        "ey" + "JhbGciOiJIUzI1NiJ9." + "ey" + "JzdWIiOiIxMjM0In0." + _fill(_ALNUM + "_-", 43)
    ],
    "npm_token": ["np" + "m_" + _fill(_ALNUM, 36)],
    "pypi_token": ["py" + "pi-" + "AgEIcHlwaS5vcmc" + _fill(_ALNUM + "_-", 80)],
    "sendgrid_api_key": ["S" + "G." + _fill(_ALNUM, 22) + "." + _fill(_ALNUM + "-", 43)],
    "twilio_credential": ["S" + "K" + _fill(_HEX, 32), "A" + "C" + _fill(_HEX, 32)],
    "azure_storage_key": [
        "DefaultEndpointsProtocol=https;AccountName=x;Account"
        + "Key="
        + _fill(_ALNUM + "+/", 86)
        + "==",
        "SharedAccess" + "Key=" + _fill(_ALNUM + "+/", 43) + "=",
    ],
    "huggingface_token": ["h" + "f_" + _fill(_ALNUM, 34)],
    "digitalocean_token": ["do" + "p_v1_" + _fill(_HEX, 64)],
    "shopify_token": ["shp" + "at_" + _fill(_HEX, 32)],
    "discord_webhook_url": [
        "https://discord.com/api/" + "webhooks/123456789012345678/" + _fill(_ALNUM + "_-", 68)
    ],
    "url_embedded_credentials": [
        "postgres" + "://svc:" + "Tr0ub4dor" + "@db.internal/app",
        "https" + ":\\/\\/alice:" + "s3cr3t" + "@example.org\\/x",
        "mongodb+srv" + "://u:" + "p4ss" + "@cluster0.example.net",
    ],
}

_NEAR_MISSES = [
    # The project's own vocabulary and digests.
    "req_secret_env_read",
    "sha256:" + _fill(_HEX, 64),
    "secret_like_data_synthetic",
    "omitted_secret_or_live_access_material",
    "credential_value",
    "raw_environment_export_requested",
    "live_network_target",
    "rule:no_secret_or_env_read_from_untrusted_context",
    "synthetic_live_secret_sentinel",
    "rule:no_live_network_from_untrusted_context",
    "reason:no_live_network_from_untrusted_context",
    # Prefixes too short to stand alone, so guarded against a letter or digit before them
    # (and, for the Hugging Face shape, after them): ids, digests and base64url runs.
    "bench" + "mark_live_" + _fill(_HEX, 24),
    "helpdesk-admin-" + "dashboard-configuration-service-v2-" + _fill(_HEX, 8),
    "vendor" + "_v1_" + _fill(_HEX, 64),
    "HM" + "AC" + _fill(_HEX, 64),
    "model_" + "hf_" + "LlamaForSequenceClassificationWithPastKeyValues",
    _fill(_ALNUM + "_-", 20) + "x" + "hf_" + _fill(_ALNUM, 50),
    # Credential shapes that are too short, too long, not live, or public.
    "AK" + "IA" + _fill("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 15),
    "AK" + "IA" + _fill("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 17),
    "gh" + "p_" + _fill(_ALNUM, 35),
    "sk" + "_test_" + _fill(_ALNUM, 24),
    "np" + "m_" + _fill(_ALNUM, 35),
    "AI" + "za" + _fill(_ALNUM, 34),
    "xo" + "xb-short",
    "ey" + "JhbGciOiJIUzI1NiJ9",
    "-----BEGIN " + "PUBLIC KEY-----",
    "-----BEGIN " + "CERTIFICATE-----",
    "aws_secret_access_key",
    # URLs that carry no password.
    "https://user@example.org/x",
    "https://example.org:8443/path@v1",
    "https://user:****@example.org",
    "https://user:<password>@example.org",
    "mock://episode_1:req_2@v1",
    "git@github.com:org/repo.git",
]


def _scan(text: str) -> dict[str, int]:
    return ForbiddenScanner.default().scan_bytes(text.encode("utf-8"))[0]


def _all_examples() -> list[tuple[str, str]]:
    pairs = [(cid, ex) for cid, examples in _CREDENTIAL_EXAMPLES.items() for ex in examples]
    for forbidden in load_forbidden_classes():
        pairs += [(forbidden.class_id, token) for token in forbidden.tokens]
    return pairs


def test_every_class_in_the_table_has_a_planted_example() -> None:
    class_ids = {c.class_id for c in load_forbidden_classes()}
    assert class_ids == {class_id for class_id, _ in _all_examples()}


# Ids name the class, never the example, so no credential shape reaches pytest's output.
@pytest.mark.parametrize(
    ("class_id", "example"),
    [pytest.param(cid, ex, id=f"{cid}-{i}") for i, (cid, ex) in enumerate(_all_examples())],
)
def test_planted_example_hits_its_class_once(class_id: str, example: str) -> None:
    assert _scan(example) == {class_id: 1}
    assert _scan(f"before {example} after") == {class_id: 1}
    if "\\" not in example:  # an example with a backslash is already in its escaped form
        # Inside a JSON string an example's quotes arrive escaped; that shape must hit too.
        assert _scan(json.dumps({"note": example, "body_redacted": True})) == {class_id: 1}


@pytest.mark.parametrize("text", _NEAR_MISSES, ids=range(len(_NEAR_MISSES)))
def test_near_miss_does_not_hit(text: str) -> None:
    assert _scan(json.dumps({"note": text})) == {}


def test_near_miss_prefix_of_a_sentinel_does_not_hit() -> None:
    token = _sentinel("synthetic_live_secret_sentinel")
    assert _scan(token[:-1] + " " + token[1:]) == {}


# A token glued into an id: `_` is a word character, so a `\b` at a token's edge would miss
# every one of these; the scan fails closed, so each must still hit, once.
_GLUE_BEFORE = ["req_", "x", "_", "-", "7"]
_GLUE_AFTER = ["", "_tail"]
# Examples whose prefix is too short to stand alone: `(?:\b|_)` keeps a letter or digit
# from preceding them (see the near-misses above), so only `_` and `-` may glue them.
_GUARDED = {
    ("stripe_live_key", 0),
    ("stripe_live_key", 1),
    ("openai_api_key", 0),
    ("twilio_credential", 0),
    ("twilio_credential", 1),
    ("huggingface_token", 0),
    ("digitalocean_token", 0),
}


def _glued_cases() -> list[tuple[str, str, str, str]]:
    cases = []
    for class_id, examples in _CREDENTIAL_EXAMPLES.items():
        for index, example in enumerate(examples):
            guarded = (class_id, index) in _GUARDED
            for before in _GLUE_BEFORE:
                if guarded and before[-1].isalnum():
                    continue
                cases += [(class_id, before, example, after) for after in _GLUE_AFTER]
    return cases


def test_every_credential_class_is_checked_glued() -> None:
    credential_ids = {c.class_id for c in load_forbidden_classes() if c.patterns}
    assert {case[0] for case in _glued_cases()} == credential_ids


@pytest.mark.parametrize(
    ("class_id", "before", "example", "after"),
    [
        pytest.param(*case, id=f"{case[0]}-{i}-{case[1]}{case[3]}")
        for i, case in enumerate(_glued_cases())
    ],
)
def test_glued_example_hits_once_and_its_matched_text_redacts_it(
    class_id: str, before: str, example: str, after: str
) -> None:
    glued = before + example + after
    counts, matched = ForbiddenScanner.default().scan_bytes(glued.encode("utf-8"))
    assert counts == {class_id: 1}
    (text,) = (m.decode("utf-8") for m in matched)
    # The matched text is the token, or the token with the one glue byte a guard took, or
    # (a URL) its credential-bearing head: redacting by it replaces the whole value.
    covered = example in text or text in example
    assert covered
    assert redact({"request_id": glued, "n": [glued]}, matched) == {
        "request_id": REDACTED,
        "n": [REDACTED],
    }
    if "\\" not in example:
        assert _scan(json.dumps({"request_id": glued, "body_redacted": True})) == {class_id: 1}


def _scan_files(files: Iterable[tuple[str, Path]]) -> ScanReport:
    """Scan files as a replay does, each under its relative path."""
    collector = _ScanCollector(ForbiddenScanner.default())
    for relative, path in files:
        collector(relative, path.read_bytes())
    return collector.report()


def _project_texts() -> list[Path]:
    patterns = ("fixtures/**/*", "tests/data/**/*", "src/sandbox_replay/data/codes/*.md")
    return sorted(
        path
        for pattern in patterns
        for path in REPO.glob(pattern)
        if path.is_file() and "__pycache__" not in path.parts
    )


def test_project_fixtures_and_code_docs_scan_clean() -> None:
    files = _project_texts()
    assert len(files) > 50
    assert any(path.suffix == ".md" for path in files)
    report = _scan_files((str(path.relative_to(REPO)), path) for path in files)
    assert report.hits == ()


def test_bundle_with_a_token_glued_into_a_request_id_is_blocked_and_redacted(
    tmp_path: Path,
) -> None:
    token = "gh" + "p_" + _fill(_ALNUM, 36)
    request_id = "req_" + token
    bundle = tmp_path / "bundle"
    shutil.copytree(EXPORTED_BUNDLE, bundle)
    planted = 0
    for path in sorted(bundle.glob("*.json")):
        text = path.read_text("utf-8")
        planted += text.count('"req_safe_fixture_edit"')
        path.write_text(text.replace('"req_safe_fixture_edit"', json.dumps(request_id)), "utf-8")
    assert planted >= 2
    out = tmp_path / "out"
    result = CliRunner().invoke(
        app, ["run-sandbox-bundle", "--input", str(bundle), "--out", str(out)]
    )
    assert result.exit_code == 1, result.output[-400:]
    written = sorted(path for path in out.rglob("*") if path.is_file())
    assert written
    (record,) = (json.loads(path.read_bytes()) for path in written if path.suffix == ".json")
    assert record["status"] == "blocked"
    assert record["secret_exclusion_scan"]["hits_by_class"] == {"github_token": planted}
    forms = {token, token[:12], token[4:], json.dumps(token)[1:-1]}
    # Counts only, so a failure never prints the token.
    for path in written:
        data = path.read_bytes()
        leaked = len([form for form in forms if form.encode() in data])
        assert leaked == 0, path.name
    printed = len([form for form in forms if form in result.output])
    assert printed == 0


def test_counts_are_exact_and_matched_texts_distinct() -> None:
    key = "AK" + "IA" + "IOSFODNN7EXAMPLE"
    token = _sentinel("synthetic_raw_environment_sentinel")
    text = f"{key} {key}\n{token}{token}{token} {key}"
    counts, matched = ForbiddenScanner.default().scan_bytes(text.encode())
    assert counts == {"aws_access_key_id": 3, "synthetic_raw_environment_sentinel": 3}
    assert matched == {key.encode(), token.encode()}


def test_overlapping_shapes_count_once_for_the_first_listed_class() -> None:
    token = "gh" + "p_" + _fill(_ALNUM, 36)
    url = "https" + "://bot:" + token + "@example.org/repo"
    assert _scan(url) == {"url_embedded_credentials": 1}


def _planted_files(tmp_path: Path) -> tuple[list[tuple[str, Path]], list[str]]:
    secrets = [
        "AK" + "IA" + "IOSFODNN7EXAMPLE",
        _sentinel("synthetic_live_secret_sentinel"),
        "postgres" + "://svc:" + "Tr0ub4dor" + "@db.internal/app",
    ]
    (tmp_path / "source_modules").mkdir()
    contents = {
        "source_modules/policy.md": f"# Policy\n{secrets[2]}\n",
        "action_requests.json": json.dumps({"a": [secrets[0], secrets[1], secrets[0]]}),
        "cold_replay.json": json.dumps({"cold_replay": []}),
    }
    files = []
    for relative, text in contents.items():
        (tmp_path / relative).write_text(text)
        files.append((relative, tmp_path / relative))
    return files[::-1], secrets


def test_scan_report_is_sorted_and_deterministic(tmp_path: Path) -> None:
    files, _ = _planted_files(tmp_path)
    first = _scan_files(files)
    second = _scan_files(files[::-1])
    assert first == second
    assert json.dumps(first.to_record()) == json.dumps(second.to_record())
    assert [(h.path, h.class_id, h.count) for h in first.hits] == [
        ("action_requests.json", "aws_access_key_id", 2),
        ("action_requests.json", "synthetic_live_secret_sentinel", 1),
        ("source_modules/policy.md", "url_embedded_credentials", 1),
    ]
    assert first.files_scanned == 3
    assert first.bytes_scanned == sum(path.stat().st_size for _, path in files)
    assert first.blocking_hit_count == 4
    assert first.flagged_paths == {"action_requests.json", "source_modules/policy.md"}


def test_record_and_repr_never_carry_the_matched_text(tmp_path: Path) -> None:
    files, secrets = _planted_files(tmp_path)
    report = _scan_files(files)
    record = report.to_record()
    shown = [json.dumps(record), repr(report), str(report), repr(report.hits)]
    shown += [repr(c) for c in report.classes]
    for text in shown:
        for secret in secrets:
            assert secret not in text
            assert secret.split("://")[-1] not in text
    # Each secret is covered by a matched text, so the caller can redact it.
    assert all(any(m in s.encode() for m in report.matched_texts) for s in secrets)
    assert record["status"] == "blocked"
    assert record["hits_by_class"] == {
        "aws_access_key_id": 2,
        "synthetic_live_secret_sentinel": 1,
        "url_embedded_credentials": 1,
    }
    assert [c["class_id"] for c in record["classes_hit"]] == list(record["hits_by_class"])
    assert record["body_redacted"] is True
    # The record itself, labels and remediations included, is clean to a second scan.
    assert _scan(json.dumps(record)) == {}


def test_clean_files_pass(tmp_path: Path) -> None:
    path = tmp_path / "sandbox_policy.json"
    path.write_text(
        json.dumps({"secret_like_data_synthetic": True, "digest": "sha256:" + _HEX * 4})
    )
    record = _scan_files([("sandbox_policy.json", path)]).to_record()
    assert record == {
        "status": "pass",
        "files_scanned": 1,
        "bytes_scanned": path.stat().st_size,
        "blocking_hit_count": 0,
        "hits_by_class": {},
        "hits": [],
        "classes_hit": [],
        "class_count": len(load_forbidden_classes()),
        "body_redacted": True,
    }


def test_report_equality_ignores_matched_texts() -> None:
    report = ScanReport(1, 2, (), (), frozenset({b"x"}))
    assert report == ScanReport(1, 2, (), ())


def test_default_scanner_is_built_once() -> None:
    assert ForbiddenScanner.default() is ForbiddenScanner.default()


def test_the_packaged_table_passes_the_checks_its_scanner_skips() -> None:
    """The default scanner does not check the packaged patterns at each start: this does."""
    checked = ForbiddenScanner(load_forbidden_classes())  # each pattern compiled and probed
    default = ForbiddenScanner.default()
    assert default.classes == checked.classes == load_forbidden_classes(check_patterns=False)
    text = "\n".join(example for _, example in _all_examples()).encode()
    found = default.scan_bytes(text)
    assert found == checked.scan_bytes(text)
    assert set(found[0]) == {c.class_id for c in default.classes}


def test_table_text_is_clean_apart_from_its_own_tokens() -> None:
    for forbidden in load_forbidden_classes():
        shown = f"{forbidden.class_id} {forbidden.label} {forbidden.remediation}"
        assert _scan(shown) == {}, forbidden.class_id


_GOOD_CLASS = {"class_id": "x_class", "label": "X", "remediation": "Remove it.", "tokens": ["XX"]}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ("[]", "top level must be an object"),
        ('{"table_id": "t"}', "missing key(s) classes"),
        ('{"table_id": "t", "classes": [], "extra": 1}', "unknown key(s) extra"),
        ('{"table_id": "t", "table_id": "u", "classes": []}', "duplicate key 'table_id'"),
        ('{"table_id": "t", "classes": []}', "classes must be a non-empty list"),
        ("{", "not valid JSON"),
        ("\udcff", "not valid JSON"),
    ],
)
def test_malformed_table_gives_a_clear_error(tmp_path: Path, document: str, message: str) -> None:
    path = tmp_path / "table.json"
    path.write_bytes(document.encode("utf-8", "surrogateescape"))  # \udcff is byte 0xff
    with pytest.raises(ForbiddenClassesError, match=re.escape(message)):
        load_forbidden_classes(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"class_id": "Bad-Id"}, "class_id must be lower_snake_case"),
        ({"label": ""}, "label must be a non-empty string"),
        ({"tokens": "XX"}, "tokens must be a list of non-empty strings"),
        ({"tokens": [], "patterns": []}, "needs at least one token or pattern"),
        ({"patterns": ["[a-"]}, r"patterns\[0\]: not a valid RE2 pattern"),
        ({"patterns": ["(a)b"]}, "must not capture"),
        ({"patterns": ["ab+"]}, "must not repeat without bound"),
        ({"patterns": ["a[+]b.*"]}, "must not repeat without bound"),
        ({"patterns": ["ab{3,}"]}, "must not repeat without bound"),
        ({"patterns": ["^ab"]}, "must not anchor"),
        ({"patterns": ["x?"]}, "must not match the empty string"),
        ({"patterns": ["caf\u00e9"]}, "must be ASCII"),
        ({"severity": "high"}, "unknown key"),
    ],
)
def test_malformed_class_names_the_class_and_the_problem(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"table_id": "t", "classes": [{**_GOOD_CLASS, **change}]}))
    with pytest.raises(ForbiddenClassesError, match=message) as raised:
        load_forbidden_classes(path)
    assert str(raised.value).startswith(f"{path}: classes[0]")


def test_duplicate_class_id_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "table.json"
    path.write_text(json.dumps({"table_id": "t", "classes": [_GOOD_CLASS, _GOOD_CLASS]}))
    with pytest.raises(ForbiddenClassesError, match="duplicate class_id 'x_class'"):
        load_forbidden_classes(path)


def test_scanner_refuses_a_class_it_cannot_scan_exactly() -> None:
    unbounded = ForbiddenClass("loose", "Loose", "Remove it.", (), (r"KEY[0-9]+",))
    with pytest.raises(ForbiddenClassesError, match=r"classes\[0\] \(loose\)"):
        ForbiddenScanner([unbounded])
    with pytest.raises(ForbiddenClassesError, match="no classes"):
        ForbiddenScanner([])


def _chunk_ends_one_by_one(lengths: list[int], limit: int) -> list[int]:
    """The decoded scan's chunking as first written: one string at a time."""
    ends, size = [], 0
    for index, length in enumerate(lengths):
        size += length + 1
        if size >= limit:
            ends.append(index + 1)
            size = 0
    if lengths and (not ends or ends[-1] != len(lengths)):
        ends.append(len(lengths))
    return ends


@settings(max_examples=300, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 300), max_size=3000),
    limit=st.sampled_from([1, 2, 7, 100, 1000, 20_000, 1_000_000]),
)
def test_decoded_scan_chunks_end_where_one_by_one_chunking_does(
    lengths: list[int], limit: int
) -> None:
    assert list(_chunk_ends(lengths, limit)) == _chunk_ends_one_by_one(lengths, limit)
