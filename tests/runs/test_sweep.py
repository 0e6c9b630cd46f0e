"""``llm-doctor sweep`` end to end: against the test SSE server made to degrade with load (a slot
limit that queues, gaps that grow with the streams in flight) it finds the knee and the budget
that binds; against the lab engine (a model of vLLM's scheduler with /metrics and a startup log)
it says why from the engine's evidence and names ``max_num_seqs`` with its current value. A
Poisson-rate sweep against a one-slot server finds its knee below the slot's capacity, draws its
curve against the rate, keeps each level's bundle for ``analyze`` and exports the knee."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from doctor.exit_codes import ExitCode
from doctor.lab.engine import LabEngine
from doctor.lab.scheduler import EngineConfig
from doctor.runs.sweep_knee import RATE_TOLERANCE
from tests.collection.test_collect import stop_mid_stream
from tests.reports.test_metrics_export import samples, value
from tests.support.sse_server import SseServer

#: Every test here runs whole sweeps against a real server (18 % of the default suite's time in
#: the 2026-12-06 review): out of the inner loop (``-m "not slow"``); ``test_sweep_knee.py`` keeps
#: the knee's rule in it.
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
COMMON = ("--no-gpu", "--no-host", "--warmup", "0")


def sweep(target: str, tmp_path: Path, *args: str) -> tuple[dict, str, int]:
    """The sweep in its own process: the server's threads here must not take the client's GIL."""
    out, html = tmp_path / "sweep.json", tmp_path / "sweep.html"
    result = subprocess.run([sys.executable, "-m", "doctor", "sweep", "--engine", target, *COMMON, "--json", str(out),
                             "--html", str(html), *args], cwd=ROOT, capture_output=True, text=True, timeout=600,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
    assert out.exists(), result.stdout + result.stderr
    return json.loads(out.read_text()), result.stdout, result.returncode


def test_a_slot_limit_that_queues_makes_ttft_bind_at_the_limit(tmp_path: Path) -> None:
    """4 slots, answers of 0.8 s: a fifth stream waits at least a quarter of an answer for a slot
    (every answer ends in turn), so TTFT jumps past its budget at 5. The ladder starts at 2 streams
    (``--start``): one stream at a time is the longest level (16 answers end to end, 13 s) and
    shows nothing the second does not."""
    with SseServer() as srv:
        doc, output, code = sweep(srv.base(ttft=0.02, itl=0.1, slots=4), tmp_path, "--no-metrics", "--max-tokens", "8",
                                  "--start", "2", "--requests", "16", "--max-concurrency", "16", "--ttft-budget", "0.15",
                                  "--tpot-budget", "0.5")
    assert code == ExitCode.HEALTHY, output
    assert [lv["concurrency"] for lv in doc["levels"]] == [2, 4, 5, 6, 8]  # doubled from 2, never 16: stopped past the knee
    assert doc["knee"] == {"concurrency": 4, "binding": "ttft", "first_over": 5}
    rec = doc["recommendation"]
    assert (rec["setting"], rec["suggested"], rec["inferred"]) == ("max_num_seqs", 4, True)  # no engine evidence
    assert all(lv["summary"]["p90_note"] for lv in doc["levels"])  # 16 requests: "p90 not established" said
    page = (tmp_path / "sweep.html").read_text()
    assert page.count('class="budget"') == 2 and "knee 4" in page and "<script" not in page
    assert "knee at 4 streams; TTFT binds first at 5" in output


def test_gaps_that_grow_with_depth_make_tpot_bind(tmp_path: Path) -> None:
    """Every gap is 40 ms per stream in flight: TPOT crosses 145 ms between 3 (120 ms) and 4 (160 ms)
    streams. (10 ms per stream and a 38 ms budget left 8 ms for a loaded machine's lag: it read 3 as over.)
    From 2 streams (``--start``), as the slot limit's sweep: one stream at a time adds a level of the
    same length and no new step to the ladder."""
    with SseServer() as srv:
        doc, output, _ = sweep(srv.base(ttft=0.01, itl=0.04, depth=1), tmp_path, "--no-metrics", "--max-tokens", "6",
                               "--start", "2", "--requests", "32", "--max-concurrency", "8", "--ttft-budget", "2",
                               "--tpot-budget", "0.145")
    assert [lv["concurrency"] for lv in doc["levels"]] == [2, 3, 4]  # lightest first; 3 was bisected
    assert doc["knee"] == {"concurrency": 3, "binding": "tpot", "first_over": 4}
    assert doc["recommendation"]["suggested"] == 3
    assert "TPOT binds first at 4" in output


def test_the_engine_evidence_says_why_and_names_max_num_seqs_with_its_value(tmp_path: Path) -> None:
    """The lab engine runs at most 4 sequences: at 5 streams requests wait with running = 4 (from
    /metrics) and max_num_seqs = 4 (from the startup log), while TPOT has room: raise the limit.

    Steps of 0.1 s and a 0.5 s TTFT budget: the sweep calls a client whose event loop lags past a
    quarter of the budget the bottleneck (``doctor.runs.sweep_knee.LAG_SHARE_OF_BUDGET``), rightly, and on a
    loaded 2-core machine the loop lagged past the 62 ms a 0.25 s budget allows.

    The ladder starts at 2 streams (``--start``): one at a time (12 answers of 1.3 s end to end, a
    third of this sweep's time) adds no evidence, while the raise to 8 needs TPOT at two levels
    within budget (``doctor.runs.sweep_knee._raise_limit``)."""
    log = tmp_path / "vllm.log"
    engine = LabEngine(EngineConfig(max_num_seqs=4, max_model_len=4096, kv_cache_tokens=65536, step_base_s=0.1), log_path=log)
    engine.start()
    try:
        doc, output, code = sweep(engine.url, tmp_path, "--log", str(log), "--scrape-interval", "0.1", "--max-tokens", "12",
                                  "--prompt-tokens", "64", "--start", "2", "--requests", "12", "--max-concurrency", "6",
                                  "--ttft-budget", "0.5", "--tpot-budget", "0.4")
    finally:
        engine.stop()
    assert code == ExitCode.HEALTHY, output
    assert doc["knee"]["concurrency"] == 4 and doc["knee"]["binding"] == "ttft", output
    over = next(lv for lv in doc["levels"] if lv["concurrency"] == doc["knee"]["first_over"])
    assert over["engine"]["max_num_seqs"] == 4 and over["engine"]["running_max"] == 4 and over["engine"]["waiting_max"] > 0
    rec = doc["recommendation"]
    assert (rec["setting"], rec["current"], rec["suggested"], rec["inferred"]) == ("max_num_seqs", 4, 8, False)
    assert any("requests queued in the engine" in why for why in rec["why"])


def test_sigterm_ends_the_level_in_flight_and_reports_the_levels_so_far(tmp_path: Path) -> None:
    out = tmp_path / "sweep.json"
    with SseServer() as srv:
        command = [sys.executable, "-m", "doctor", "sweep", "--engine", srv.base(itl="0.05", n="100000"), *COMMON,
                   "--no-metrics", "--requests", "2", "--json", str(out)]
        code, output, _ = stop_mid_stream(command, srv, signal.SIGTERM)
    assert code == ExitCode.INTERRUPTED and "Traceback" not in output, output
    doc = json.loads(out.read_text())
    assert doc["interrupted"] and [lv["interrupted"] for lv in doc["levels"]] == [True]
    assert doc["knee"] == {"concurrency": None, "binding": "interrupted", "first_over": 1}  # a cut level is no knee


#: The rate sweep's server: one slot, answers of 4 tokens 20 ms apart after 10 ms (70 ms each), so
#: it serves at most about 14 requests/s; above that the queue grows for as long as arrivals come.
RATE_SERVER = {"ttft": 0.01, "itl": 0.02, "slots": 1}
CAPACITY_RPS = 1 / (0.01 + 3 * 0.02)
#: The lightest rate: under half what the slot serves (TTFT p90 ~0.04 s of the 0.2 s budget, within
#: it while each answer takes up to twice its 70 ms on a loaded machine; at 8/s, only up to 1.6x).
#: Each level sends 64 requests, so the rate sets its length: from 4 requests/s the first level
#: alone took 16 s, and showed nothing 6 does not.
RATE_START = 6
RATE_ARGS = ("--no-metrics", "--by", "rate", "--start", str(RATE_START), "--max-rate", "32", "--max-tokens", "4",
             "--requests", "64", "--ttft-budget", "0.2", "--tpot-budget", "0.5")


@pytest.fixture(scope="module")
def rate_sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, str, int, Path]:
    """One Poisson-rate sweep against the one-slot server, its levels' bundles and metrics kept."""
    tmp = tmp_path_factory.mktemp("rate-sweep")
    with SseServer() as srv:
        doc, output, code = sweep(srv.base(**RATE_SERVER), tmp, *RATE_ARGS, "--bundle-dir", str(tmp / "levels"),
                                  "--metrics-textfile", str(tmp / "sweep.prom"))
    return doc, output, code, tmp


def test_a_rate_sweep_finds_the_knee_below_the_servers_capacity(rate_sweep: tuple[dict, str, int, Path]) -> None:
    """A queue forms in front of the one slot: TTFT binds, the knee is below what the slot can
    serve and above the lightest rate, and without engine evidence the recommendation is Little's
    law at the knee (docs/load.md), marked inferred."""
    doc, output, code, _ = rate_sweep
    assert code == ExitCode.HEALTHY, output
    rates = [lv["rate"] for lv in doc["levels"]]
    knee = doc["knee"]
    assert knee["rate"] is not None, output
    first_over = next(lv for lv in doc["levels"] if lv["rate"] == knee["first_over"])
    # TTFT binds; on a busy host the client may have been the bottleneck there first, and then says so
    assert knee["binding"] == ("client" if first_over["suspect"] and not first_over["over"] else "ttft"), output
    assert RATE_START <= knee["rate"] < CAPACITY_RPS < 32
    assert knee["first_over"] <= knee["rate"] * (1 + RATE_TOLERANCE)  # bisected to the tolerance
    assert max(rates) < 32  # never 32: stopped past the knee (the first level over: 12 or 24)
    within = {lv["rate"]: lv["within"] for lv in doc["levels"]}
    assert all(within[r] for r in rates if r <= knee["rate"]) and not any(within[r] for r in rates if r >= knee["first_over"])
    assert all(lv["over"] == ["ttft"] for lv in doc["levels"] if not (lv["within"] or lv["suspect"]))  # TPOT never near 0.5 s
    at_knee = next(lv for lv in doc["levels"] if lv["rate"] == knee["rate"])
    rec = doc["recommendation"]
    assert (rec["setting"], rec["inferred"]) == ("max_num_seqs", True)
    assert any("no engine evidence at this level" in why for why in rec["why"])
    assert rec["suggested"] == max(1, math.ceil(knee["rate"] * at_knee["summary"]["e2e_p50_s"]))
    said = "TTFT binds first" if knee["binding"] == "ttft" else "the client was the bottleneck"
    assert f"knee at {knee['rate']:g} requests/s; {said} at {knee['first_over']:g}" in output


def test_a_rate_sweeps_curve_is_drawn_against_the_rate(rate_sweep: tuple[dict, str, int, Path]) -> None:
    """Each panel's x axis is the offered rate: every level a tick and a point, placed in
    proportion to its rate, and the knee's marker on the knee's point."""
    doc, _, _, tmp = rate_sweep
    page = (tmp / "sweep.html").read_text()
    assert page.count('class="budget"') == 2 and "<script" not in page
    assert page.count("offered rate (requests/s)") == 3
    panel = re.search(r'<svg[^>]*aria-label="TTFT p90 by level".*?</svg>', page, re.S)
    assert panel is not None
    points = {float(at): float(cx) for cx, at in re.findall(r'<circle cx="([\d.]+)"[^>]*><title>TTFT p90 [^<]* at ([\d.]+)</title>', panel[0])}
    rates = sorted(lv["rate"] for lv in doc["levels"])
    assert sorted(points) == rates
    lo, hi = rates[0], rates[-1]
    per_rps = (points[hi] - points[lo]) / (hi - lo)
    assert per_rps > 0 and all(abs(points[r] - (points[lo] + per_rps * (r - lo))) < 0.5 for r in rates)  # a linear axis
    knee = doc["knee"]["rate"]
    marker = re.search(r'<line x1="([\d.]+)"[^>]*class="total"><title>knee at ([\d.]+)</title>', panel[0])
    assert marker is not None and float(marker[2]) == knee and abs(float(marker[1]) - points[knee]) < 0.5
    for tick in rates:
        assert f'class="tick" text-anchor="middle">{tick:g}</text>' in panel[0]


def test_each_level_is_kept_and_analyze_reads_it_as_the_sweep_did(rate_sweep: tuple[dict, str, int, Path]) -> None:
    """``--bundle-dir`` keeps one bundle per level; ``analyze`` of the first level over, offline,
    gives the level's numbers and its verdict (over TTFT), judged by the budgets it was made with."""
    doc, _, _, tmp = rate_sweep
    kept = sorted(p.name for p in (tmp / "levels").iterdir())
    assert kept == sorted(f"level-{lv['rate']:g}.json.gz" for lv in doc["levels"])
    for lv in doc["levels"]:
        assert lv["bundle"] == str(tmp / "levels" / f"level-{lv['rate']:g}.json.gz")
    over = next(lv for lv in doc["levels"] if lv["rate"] == doc["knee"]["first_over"])
    result = subprocess.run([sys.executable, "-m", "doctor", "analyze", over["bundle"], "--format", "json"], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    again = json.loads(result.stdout)
    assert again["scenario"] == "sweep-rate" and again["bundle"]["run"]["arrival"] == f"poisson:{over['rate']:g}/s"
    assert again["summary"] == over["summary"]  # every number, and the budgets it is over
    assert again["summary"]["over_budgets"] == over["over"] and not over["within"]


def test_the_sweep_exports_its_knee_and_the_budget_that_binds(rate_sweep: tuple[dict, str, int, Path]) -> None:
    doc, _, _, tmp = rate_sweep
    parsed = samples((tmp / "sweep.prom").read_text())
    run = {"region": "", "by": "rate"}
    assert value(parsed, "llm_doctor_sweep_knee_requests_per_second", **run) == doc["knee"]["rate"]
    assert {b: value(parsed, "llm_doctor_sweep_binding", budget=b, **run) for b in ("ttft", "tpot", "client", "interrupted")} == {
        "ttft": 1.0, "tpot": 0.0, "client": 0.0, "interrupted": 0.0}
    assert value(parsed, "llm_doctor_sweep_recommended", setting="max_num_seqs", **run) == doc["recommendation"]["suggested"]
    assert value(parsed, "llm_doctor_sweep_levels", **run) == len(doc["levels"])
    assert not any(name == "llm_doctor_sweep_knee_streams" for name, _ in parsed)  # a rate sweep's knee is a rate
    assert not any(name == "llm_doctor_sweep_max_num_seqs" for name, _ in parsed)  # no engine evidence: not known
