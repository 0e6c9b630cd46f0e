"""Run ``llm-doctor diagnose`` as a user would, keep its bundle, and compare its verdict.

The CLI runs as a subprocess (``python -m doctor``, the console script's entry point), so the
probe's client self-check measures a process of its own rather than pytest, and the exit code
is the real one. With ``LLM_DOCTOR_RECORD=1`` the live run's bundle replaces the scenario's
recorded fixture (``fixtures/bundles/realvllm-<name>.json.gz``); provenance goes in
``fixtures/PROVENANCE.md`` by hand.

A run whose own client froze for longer than ``RERUN_AFTER_FREEZE_S`` (it says so: the self-check
keeps each freeze) is run once more, as its report advises: CI's 2-core virtual machines have
frozen the probing process alone for 34 s beside a busy engine, while vLLM and the users' process
went on. Such a run measured the machine, not the scenario. The first run stays beside it, in ``OUT-frozen/``.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.realvllm.scenarios import Scenario
from tests.support.served import stop_group

DIAGNOSE_TIMEOUT_S = 600.0
MAX_RECORDED_BYTES = 1 << 20
#: A freeze of the probing client this long voids a run (every budget here is 4 s or less).
RERUN_AFTER_FREEZE_S = 5.0
#: The key, in the returned report only (not on disk), of the harness's own account of its runs.
HARNESS = "harness_runs"


def run_diagnose(scenario: Scenario, out: Path, *, engine: str | None = None, log: Path | None = None,
                 gateway: str | None = None, prometheus: str | None = None) -> dict[str, Any]:
    """Diagnose ``engine`` (and ``gateway``), or ``prometheus``'s history, with the scenario's flags;
    return the JSON report (of a second run when the first one's client froze)."""
    runs: list[str] = []  # how long each run took, for the assertion message (CI's log keeps only the tail)

    def once() -> dict[str, Any]:
        start = time.monotonic()
        report = _diagnose(scenario, out, engine=engine, log=log, gateway=gateway, prometheus=prometheus)
        runs.append(f"{time.monotonic() - start:.0f} s, the client froze {longest_freeze(report):.1f} s at most")
        report[HARNESS] = runs
        return report

    report = once()
    if longest_freeze(report) > RERUN_AFTER_FREEZE_S:
        shutil.copytree(out, out.parent / f"{out.name}-frozen", dirs_exist_ok=True)
        report = once()
    return report


def longest_freeze(report: dict[str, Any]) -> float:
    """The longest freeze of the probing client in the report's bundle, in seconds."""
    client = ((report.get("bundle") or {}).get("stream") or {}).get("client") or {}
    return max((b - a for a, b in client.get("freezes") or []), default=0.0)


def _diagnose(scenario: Scenario, out: Path, *, engine: str | None, log: Path | None,
              gateway: str | None, prometheus: str | None) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    report, bundle = out / "report.json", out / "bundle.json.gz"
    targets = [*(["--engine", engine] if engine else []), *(["--gateway", gateway] if gateway else []),
               *(["--log", str(log)] if log else []), *(["--prometheus", prometheus] if prometheus else [])]
    cmd = [sys.executable, "-m", "doctor", "diagnose", *targets, *scenario.probe_args, *scenario.budget_args(),
           "--json", str(report), "--html", str(out / "report.html"), "--bundle", str(bundle)]
    (out / "command.txt").write_text(" ".join(cmd) + "\n")
    returncode, stdout, stderr = _timed_run(cmd, out / "progress.txt")
    # 0 healthy, 1 a symptom: both are answers; anything else is a failure of the run itself.
    assert returncode in (0, 1), f"exit {returncode}\n{stdout}\n{stderr}"
    assert "Traceback" not in stderr, stderr
    if os.environ.get("LLM_DOCTOR_RECORD") == "1":
        record(bundle, scenario.recorded)
    return json.loads(report.read_text())


def _timed_run(cmd: list[str], progress: Path) -> tuple[int, str, str]:
    """Run ``cmd`` under ``DIAGNOSE_TIMEOUT_S``; (exit code, stdout, stderr). Each stderr line (the
    CLI's progress) is written to ``progress`` as it comes, with the seconds since the start, so a
    run that overstays says in its failure which step took the time (CI keeps only the log's tail)."""
    start = time.monotonic()
    lines: list[str] = []
    with progress.open("w") as sink, tempfile.TemporaryFile("w+") as stdout:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        assert proc.stderr is not None

        def read() -> None:
            for line in proc.stderr or ():
                lines.append(f"[{time.monotonic() - start:6.1f} s] {line.rstrip()}")
                sink.write(lines[-1] + "\n")
                sink.flush()

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            proc.wait(timeout=DIAGNOSE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            reader.join(timeout=5.0)
            raise AssertionError(f"diagnose ran past {DIAGNOSE_TIMEOUT_S:g} s; its progress:\n"
                                 + "\n".join(lines[-40:])) from None
        reader.join(timeout=5.0)
        stdout.seek(0)
        return proc.returncode, stdout.read(), "\n".join(lines)


def record(bundle: Path, dest: Path) -> None:
    """Keep a live bundle as a fixture (gzipped JSON, under 1 MiB)."""
    size = bundle.stat().st_size  # save() gzips a .gz path
    assert size < MAX_RECORDED_BYTES, f"{bundle} is {size} bytes gzipped; trim it before recording"
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(bundle, dest)


def verdict_mismatches(report: dict[str, Any], scenario: Scenario) -> list[str]:
    """What differs from the scenario's expected verdict; empty when it matches."""
    verdict = report["verdict"]
    problems = []
    if verdict["symptom"] != scenario.symptom:
        problems.append(f"symptom {verdict['symptom']!r}, expected {scenario.symptom!r}")
    setting = (verdict.get("primary_remediation") or {}).get("setting")
    if setting != scenario.setting:
        problems.append(f"primary remediation setting {setting!r}, expected {scenario.setting!r}")
    codes = [f["code"] for f in report["findings"]]
    if scenario.finding and scenario.finding not in codes:
        problems.append(f"no {scenario.finding} finding among {codes}")
    if scenario.symptom == "healthy":  # "healthy: no warning" (the client self-check is info, by design)
        problems += [f"warning-level finding {f['code']} {f['name']}: {f['summary']}"
                     for f in report["findings"] if f["severity"] in ("warning", "critical")]
    return problems


def explain(report: dict[str, Any]) -> str:
    """The verdict and findings in a few lines, for an assertion message."""
    verdict = report["verdict"]
    lines = [f"verdict: {verdict['symptom']}: {verdict['summary']}", *(f"  - {r}" for r in verdict.get("reasoning", []))]
    lines += [f"finding {f['code']} {f['name']} ({f['severity']}): {f['summary']}" for f in report["findings"]]
    lines += [f"diagnose run {i}: {run}" for i, run in enumerate(report.get(HARNESS, []), 1)]
    return "\n".join(lines)


def _s(value: float | None, unit: str = "s") -> str:
    return "-" if value is None else f"{value:.3f} {unit}"


def evidence(report: dict[str, Any]) -> str:
    """The evidence numbers the verdict should follow, in a few lines: the probe's requests one by one
    (warm-up and failed ones too), the server's histograms and gauges over the window, preemptions."""
    lines = []
    stream = (report.get("bundle") or {}).get("stream") or {}
    for r in stream.get("requests", []):
        ttft = r["t_first_token"] - r["t_sent"] if r.get("t_first_token") is not None else None
        tokens = r.get("completion_tokens") or len(r.get("tokens") or [])
        tpot = ((r["t_last_token"] - r["t_first_token"]) / (tokens - 1)
                if r.get("t_last_token") is not None and r.get("t_first_token") is not None and tokens > 1 else None)
        times = [t["t"] for t in r.get("tokens") or []]
        gap = max((b - a for a, b in itertools.pairwise(times)), default=None)
        lines.append(f"probe {r['path']} #{r['index']}{' warm-up' if r.get('warmup') else ''} {r['outcome']}: "
                     f"TTFT {_s(ttft)}, TPOT {_s(tpot)}, max gap {_s(gap)}, tokens {tokens}"
                     + (f", error {r['error']}" if r.get("error") else ""))
    window = (report.get("views") or {}).get("metrics_window") or {}
    if window:
        lines.append(f"server window ({window.get('source')}, {window.get('window_s', 0):.0f} s): "
                     f"preemptions {window.get('preemptions')}, prompt tokens {window.get('prompt_tokens')}, "
                     f"generation tokens {window.get('generation_tokens')}")
        for name in ("ttft", "queue", "prefill", "decode", "itl", "e2e"):
            h = window.get(name)
            if h:
                lines.append(f"  {name}: n {h['count']:.0f}, mean {_s(h.get('mean'))}, p50 <= {h.get('p50_le')}, "
                             f"p90 <= {h.get('p90_le')}, p99 <= {h.get('p99_le')}")
        for name in ("running", "waiting", "kv_usage"):
            g = window.get(name)
            if g:
                lines.append(f"  {name}: min {g['min']:.3g}, max {g['max']:.3g}, last {g['last']:.3g}")
    return "\n".join(lines)
