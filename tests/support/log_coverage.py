"""Key-fact extraction on the held-out real logs (``fixtures/logs/held-out``), as a score.

The held-out logs are excerpts pasted in public bug reports that the parser was not written
against: ``EXPECTED.json`` names each one's source and the key facts a person reads in it (the
last startup's; ``errors``: the kinds of its startup errors, one fact). Each log is read the way
a run reads it (the scanner's gate, then the parser), so a line the gate misses costs its facts
as surely as a misread one. ``python -m tests.support.log_coverage`` prints the score and every
miss; ``docs/log-coverage.md`` records it, and ``tests/parsers/test_log_coverage.py`` keeps it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.engine_readers.vllm import parse_lines
from doctor.probes.logfile import read_log

HELD_OUT = Path(__file__).resolve().parent.parent.parent / "fixtures" / "logs" / "held-out"


def same_value(actual: Any, expected: Any) -> bool:
    """A parsed value against the expected one: floats to 4 decimals, everything else exactly
    (a bool is not an int, ``2048`` is not ``"2048"``)."""
    if isinstance(expected, float) and isinstance(actual, (int, float)) and not isinstance(actual, bool):
        return round(actual, 4) == round(expected, 4)
    return actual == expected and type(actual) is type(expected)


@dataclass
class Coverage:
    found: int = 0
    total: int = 0
    misses: list[tuple[str, str, Any, Any]] = field(default_factory=list)  # (log, fact, expected, parsed)

    @property
    def score(self) -> float:
        return self.found / self.total if self.total else 0.0


def measure(directory: Path = HELD_OUT) -> Coverage:
    """How many of the expected facts of every held-out log are parsed, and which are not."""
    expected: dict[str, dict[str, Any]] = json.loads((directory / "EXPECTED.json").read_text(encoding="utf-8"))
    coverage = Coverage()
    for name, case in sorted(expected.items()):
        evidence, _errors = read_log(str(directory / name))
        facts = parse_lines(evidence.matched, name) if evidence is not None else None
        wanted: dict[str, Any] = dict(case["facts"])
        if "errors" in case:
            wanted["errors"] = case["errors"]
        for key, value in wanted.items():
            if facts is None:
                got = None
            elif key == "errors":
                got = [e.kind for e in facts.errors]
            else:
                got = facts.value(key)
            coverage.total += 1
            if same_value(got, value):
                coverage.found += 1
            else:
                coverage.misses.append((name, key, value, got))
    return coverage


def main() -> None:
    coverage = measure()
    print(f"{coverage.found} of {coverage.total} key facts ({coverage.score:.1%}) on {HELD_OUT}")
    for name, key, value, got in coverage.misses:
        print(f"  {name}: {key} expected {value!r}, parsed {got!r}")


if __name__ == "__main__":
    main()
