"""Write ``tests/data/confusables_golden.json``: ICU's confusable skeletons, to test ours by.

Usage (from the repository root, in an environment that has PyICU)::

    .venv/bin/pip install pyicu && .venv/bin/python tests/data/make_confusables_golden.py

ICU's ``SpoofChecker.getSkeleton`` gives the skeleton of each code point that
``src/sandbox_replay/checks/confusables.txt`` maps, and of sample strings: the ids the
tests use, random printable ASCII ids, and random strings that mix the table's code
points (sources and prototypes), ASCII and combining marks. Sample strings hold no
character that ``visible`` marks, since our skeleton drops those first. The file is JSON:
``{"icu": version, "unicode": version, "code_points": {"<hex>": "<hex> <hex> ..."},
"strings": [[text, skeleton], ...]}``; ``tests/test_confusables_golden.py`` reads it.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import icu

REPO = Path(__file__).resolve().parent.parent.parent
TABLE = REPO / "src" / "sandbox_replay" / "checks" / "confusables.txt"
OUT = REPO / "tests" / "data" / "confusables_golden.json"
sys.path.insert(0, str(REPO / "src"))

from sandbox_replay.checks.confusables import without_hidden  # noqa: E402

EXAMPLES = [
    "req_secret_env_read",
    "req_secret_env_r\u0435ad",
    "req_rn_m_0O_1lI|",
    "req_\u0435",
    "".join(map(chr, range(0x20, 0x7F))),
]


def _table() -> dict[int, list[int]]:
    table = {}
    for line in TABLE.read_text("utf-8").splitlines():
        if not line.startswith("#"):
            source, target, _ = line.split(";")
            table[int(source, 16)] = [int(code, 16) for code in target.split()]
    return table


def _hex(text: str) -> str:
    return " ".join(f"{ord(char):04X}" for char in text)


def main() -> None:
    checker = icu.SpoofChecker()
    table = _table()
    picked = random.Random(39)
    ascii_chars = [chr(code) for code in range(0x20, 0x7F)]
    drawn = sorted({*table, *(code for target in table.values() for code in target)})
    mixed = [chr(code) for code in drawn] + ascii_chars + [chr(c) for c in range(0x300, 0x370)]
    strings = list(EXAMPLES)
    strings += ["".join(picked.choices(ascii_chars, k=picked.randint(1, 24))) for _ in range(1000)]
    strings += ["".join(picked.choices(mixed, k=picked.randint(1, 16))) for _ in range(1500)]
    strings = [text for text in dict.fromkeys(strings) if without_hidden(text) == text]
    code_points = {f"{code:04X}": _hex(checker.getSkeleton(0, chr(code))) for code in table}
    lines = [
        "{",
        f'"icu": "{icu.ICU_VERSION}",',
        f'"unicode": "{icu.UNICODE_VERSION}",',
        '"code_points": {',
        ",\n".join(f'"{code}": "{shown}"' for code, shown in code_points.items()),
        "},",
        '"strings": [',
        ",\n".join(
            json.dumps([text, str(checker.getSkeleton(0, text))], ensure_ascii=False)
            for text in strings
        ),
        "]",
        "}",
    ]
    OUT.write_text("\n".join(lines) + "\n", "utf-8")
    print(f"wrote {OUT.relative_to(REPO)}: {len(code_points)} code points, {len(strings)} strings")


if __name__ == "__main__":
    main()
