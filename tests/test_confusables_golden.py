"""Our confusable skeleton is ICU's: on every code point of the table, and on sample strings.

The answers were computed once with PyICU by ``tests/data/make_confusables_golden.py``;
nothing here imports ICU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sandbox_replay.checks.confusables import skeleton, skeletons, standard_skeleton, without_hidden

GOLDEN = json.loads((Path(__file__).parent / "data" / "confusables_golden.json").read_text("utf-8"))
TABLE = Path(__file__).parent.parent / "src" / "sandbox_replay" / "checks" / "confusables.txt"


def _text(codes: str) -> str:
    return "".join(chr(int(code, 16)) for code in codes.split())


def test_the_golden_answers_cover_the_whole_vendored_table() -> None:
    assert GOLDEN["icu"] == "72.1" and GOLDEN["unicode"] == "15.0"
    entries = [line for line in TABLE.read_text("utf-8").splitlines() if not line.startswith("#")]
    assert len(entries) == len(GOLDEN["code_points"]) == 6311
    assert {line.split(";")[0].strip() for line in entries} == set(GOLDEN["code_points"])
    # Unicode's notice stays with the data, and its licence beside it.
    header = TABLE.read_text("utf-8").split("\n# Vendored", 1)[0]
    assert "© 2022 Unicode®, Inc." in header and "# Version: 15.0.0" in header
    licence = (TABLE.parent / "confusables-LICENSE.txt").read_text("utf-8")
    assert "UNICODE, INC. LICENSE AGREEMENT - DATA FILES AND SOFTWARE" in licence
    assert "COPYRIGHT AND PERMISSION NOTICE" in licence


def test_the_skeleton_of_every_code_point_in_the_table_is_icus() -> None:
    wrong = {
        code: shown
        for code, shown in GOLDEN["code_points"].items()
        if standard_skeleton(chr(int(code, 16))) != _text(shown)
    }
    assert not wrong, f"{len(wrong)} code points differ from ICU, as {list(wrong.items())[:5]}"
    # skeleton() first drops what draws nothing; for the rest of the table it is the same.
    for code, shown in GOLDEN["code_points"].items():
        char = chr(int(code, 16))
        assert skeleton(char) == (_text(shown) if without_hidden(char) else "")


def test_the_skeleton_of_every_sample_string_is_icus() -> None:
    texts = [text for text, _ in GOLDEN["strings"]]
    expected = [shown for _, shown in GOLDEN["strings"]]
    assert len(texts) > 2000
    assert [skeleton(text) for text in texts] == expected
    assert skeletons(texts) == expected
    ascii_ids = [text for text in texts if text.isascii()]
    assert len(ascii_ids) > 900
    assert skeletons(ascii_ids) == [skeleton(text) for text in ascii_ids]


def test_the_skeleton_needs_no_icu() -> None:
    """With ``import icu`` made to fail, the check still loads and maps look-alikes."""
    script = (
        "import sys; sys.modules['icu'] = None\n"
        "from sandbox_replay.checks.confusables import skeleton\n"
        "assert skeleton('req_\\u0435\\u200b') == skeleton('req_e') == 'req_e'\n"
        "assert skeleton('\\u0440\\u0435q') == 'peq'\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, env={**os.environ})
