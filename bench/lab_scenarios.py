"""How long each lab scenario takes through ``llm-doctor demo``, and what it concludes.

Runs ``python -m doctor demo --scenario NAME`` for every scenario (lab start, probe, scrapes,
analysis, reports, shutdown) and prints a Markdown table: wall time, the verdict's symptom and
primary setting next to the scenario's expectation, and the TTFT / TPOT p90 the summary quotes.
The lab's step costs are scaled so a scenario runs in seconds; this says whether they still do.

    .venv/bin/python bench/lab_scenarios.py [NAME ...]
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from doctor.lab.scenarios import SCENARIOS


def run(name: str) -> str:
    expect = SCENARIOS[name].expect
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "doctor", "demo", "--scenario", name, "--out-dir", out],
            capture_output=True,
            timeout=300,
            check=False,
        )
        wall = time.perf_counter() - start
        report = json.loads((Path(out) / "report.json").read_text())
    verdict = report["verdict"]
    setting = (verdict.get("primary_remediation") or {}).get("setting")
    ok = verdict["symptom"] == expect.symptom and setting == expect.setting
    summary = verdict["summary"].split(";")[0]
    return (
        f"| {name} | {wall:.1f} s | {verdict['symptom']} / {setting} | {expect.symptom} / {expect.setting} "
        f"| {'yes' if ok else '**no**'} | {summary} |"
    )


def main(names: list[str]) -> None:
    print("| scenario | wall | verdict (symptom / setting) | expected | match | summary |")
    print("|---|---:|---|---|---|---|")
    for name in names or list(SCENARIOS):
        print(run(name), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
