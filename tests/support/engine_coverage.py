"""Key-fact extraction on the held-out real artifacts of other engines, as a score per engine.

``fixtures/engines/held-out/`` holds excerpts of SGLang, llama.cpp, TGI and TensorRT-LLM logs
and scrapes from public reports and guides that the adapters were not written against (chosen
and their facts written into ``EXPECTED.json`` before the parsers were run on them). Each is read
the way ``llm-doctor log FILE --json`` and ``llm-doctor metrics FILE --json`` read it, and its
neutral facts (``engine`` among them: a wrong engine is a miss) are compared with what the
artifact states. ``python -m tests.support.engine_coverage`` prints the score per engine and
every miss; ``docs/engine-coverage.md`` records it, and ``tests/parsers/test_log_coverage.py`` keeps it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.commands.log import log_command_output
from doctor.commands.metrics import metrics_command_output
from tests.support.log_coverage import same_value

HELD_OUT = Path(__file__).resolve().parent.parent.parent / "fixtures" / "engines" / "held-out"


@dataclass
class EngineCoverage:
    found: int = 0
    total: int = 0
    misses: list[tuple[str, str, Any, Any]] = field(default_factory=list)  # (file, fact, expected, read)

    @property
    def score(self) -> float:
        return self.found / self.total if self.total else 0.0


def read_facts(path: Path, kind: str) -> dict[str, Any]:
    """The facts ``llm-doctor log`` / ``metrics`` print for ``path`` (``--json``), engine included."""
    if kind == "metrics":
        text, _code = metrics_command_output([str(path)], as_json=True)
        document = json.loads(text)
        return {**document.get("facts", {}), "engine": document.get("engine")}
    document = json.loads(log_command_output(str(path), as_json=True).text)
    return {**document.get("facts", {}), "engine": document.get("engine")}


def measure(directory: Path = HELD_OUT) -> dict[str, EngineCoverage]:
    """Per engine (the one the artifact is), how many of its expected facts are read, and which not."""
    expected: dict[str, dict[str, Any]] = json.loads((directory / "EXPECTED.json").read_text(encoding="utf-8"))
    scores: dict[str, EngineCoverage] = {}
    for name, case in sorted(expected.items()):
        kind = case.get("kind", "metrics" if name.endswith(".prom") else "log")
        read = read_facts(directory / name, kind)
        coverage = scores.setdefault(case["facts"]["engine"], EngineCoverage())
        for key, value in case["facts"].items():
            coverage.total += 1
            if same_value(read.get(key), value):
                coverage.found += 1
            else:
                coverage.misses.append((name, key, value, read.get(key)))
    return scores


def main() -> None:
    scores = measure()
    for engine, coverage in sorted(scores.items()):
        print(f"{engine}: {coverage.found} of {coverage.total} key facts ({coverage.score:.1%})")
        for name, key, value, got in coverage.misses:
            print(f"  {name}: {key} expected {value!r}, read {got!r}")


if __name__ == "__main__":
    main()
