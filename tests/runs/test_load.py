"""``llm-doctor load`` against the test SSE server, judged by the server's own log.

The server stamps every request's arrival and every chunk's send (``ServerLog``), so what the
client says about its arrivals, its TTFT and its concurrency is checked against what the server
saw: Poisson gaps with the mean and the coefficient of variation of an exponential, TTFT close to
the server's, never more streams in flight than allowed, and a client that cannot keep up
reported as late arrivals (latency from the schedule: no coordinated omission). A load run keeps
its bundle (``--bundle``), which ``analyze`` reads back as the run, and exports its summary.
"""

from __future__ import annotations

import json
import os
import random
import signal
import statistics
import subprocess
import sys
from itertools import pairwise
from pathlib import Path

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.exit_codes import ExitCode
from tests.collection.test_collect import ROOT, stop_mid_stream
from tests.reports.test_metrics_export import samples, value
from tests.support.sse_server import Sent, SseServer

COMMON = ("--no-gpu", "--no-host", "--no-metrics", "--warmup", "0")


def load(srv_base: str, tmp_path: Path, *args: str, own_process: bool = False) -> tuple[dict, str]:
    """``load`` in this process, or in its own (``own_process``) where its timings are compared with
    the server's: the server's thread here must not take the client's GIL."""
    out = tmp_path / "load.json"
    argv = ["load", "--engine", srv_base, *COMMON, "--json", str(out), *args]
    if own_process:
        done = subprocess.run([sys.executable, "-m", "doctor", *argv], cwd=ROOT, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"})
        output = done.stdout + done.stderr
    else:
        output = CliRunner().invoke(app, argv, env={"COLUMNS": "200"}).output
    assert out.exists(), output
    return json.loads(out.read_text()), output


def measured(server: SseServer) -> list[Sent]:
    """The server's log of the measured requests (the probe's warm-ups are off), in arrival order."""
    return sorted((s for s in server.log.requests.values() if s.tokens), key=lambda s: s.t_request)


def most_in_flight(sent: list[Sent]) -> int:
    """The most streams the server held at once: from each request's arrival to its last chunk."""
    edges = sorted([(s.t_request, 1) for s in sent] + [(s.chunks[-1], -1) for s in sent], key=lambda e: (e[0], e[1]))
    level = peak = 0
    for _, step in edges:
        level += step
        peak = max(peak, level)
    return peak


def ranks(values: list[float]) -> list[float]:
    """Each value's rank (1-based, ties averaged): what a rank correlation compares."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


@pytest.mark.slow
def test_server_scenario_sends_poisson_arrivals_as_the_server_saw_them(tmp_path: Path) -> None:
    """The schedule (seeded, so the same on every machine) is an exponential sample; the server
    saw it, as the client's own record of its lateness says. Every assertion on the server's times
    is an order or a rank, never a margin of seconds: a loaded machine delays sends and reads by
    tens of milliseconds (the seeded gaps' mean sits at 1.15/rate, near any fixed margin), but it
    cannot make a fixed pace look like the schedule, nor a token arrive before it was sent."""
    with SseServer() as srv:
        doc, output = load(srv.base(ttft=0.2, itl=0.005, n=4), tmp_path, "--scenario", "server", "--rate", "25",
                           "--requests", "120", "--max-tokens", "4",
                           # a budget no loaded machine's lag reaches: every request is good (0.2 s first tokens)
                           "--ttft-budget", "2", own_process=True)
        sent = {int(key.rsplit("-", 1)[1]): s for key, s in srv.log.requests.items() if s.tokens}
    traces = sorted((t for t in doc["bundle"]["stream"]["requests"] if not t["warmup"]), key=lambda t: t["t_scheduled"])
    assert len(sent) == len(traces) == 120 and {t["index"] for t in traces} == set(sent)
    scheduled = [t["t_scheduled"] for t in traces]
    planned = [b - a for a, b in pairwise(scheduled)]
    mean = statistics.fmean(planned)
    assert 0.8 < mean * 25 < 1.25  # mean gap 1/rate
    assert 0.8 < statistics.stdev(planned) / mean < 1.25  # exponential: the coefficient of variation is 1 (a fixed pace would be 0)
    # the server saw that schedule: its gaps between the same requests rise and fall with the
    # planned ones (Spearman's rho), clearly more than with the same gaps in any other order (seeded
    # shuffles: what a fixed pace, a burst or a closed loop would match). A comparison with controls,
    # not a fixed threshold: a loaded machine's jitter lowers rho, and it lowers every control's too.
    seen = [(sent[b["index"]].t_request - sent[a["index"]].t_request) / 1e9 for a, b in pairwise(traces)]
    rho = statistics.correlation(ranks(planned), ranks(seen))
    shuffles = random.Random(7)
    controls = [statistics.correlation(ranks(shuffles.sample(planned, len(planned))), ranks(seen)) for _ in range(100)]
    assert rho > max(controls) + 0.2, (rho, max(controls))
    summary = doc["summary"]
    assert doc["scenario"] == "server" and doc["bundle"]["run"]["scenario"] == "server"
    assert doc["bundle"]["run"]["arrival"] == "poisson:25/s"
    # achieved is what the client sent: the schedule's own rate at best, and a late client only lowers it
    assert summary["offered_rps"] == 25 and summary["achieved_rps"] <= (len(scheduled) - 1) / (scheduled[-1] - scheduled[0]) * 1.001
    assert summary["late"] == sum(1 for t in traces if t["t_sent"] - t["t_scheduled"] > 0.010)
    # TTFT as the client felt it counts from the schedule: never under the server's own (the token
    # is read after it was sent, the request sent after it was due), and the server's 0.2 s, not the
    # run's clock (the last request is due 5 s in): its median stays under twice the server's
    server_ttft = statistics.median((s.tokens[0] - s.t_request) / 1e9 for s in sent.values())
    assert server_ttft <= summary["ttft_p50_s"] < 2 * server_ttft
    assert summary["n"] == summary["n_ok"] == 120 and summary["good_fraction"] == 1.0
    assert summary["goodput_rps"] == summary["requests_per_s"] and summary["ttft_p90_early_s"] is not None
    assert "offered 25 /s (Poisson)" in output


def test_a_client_that_cannot_keep_up_reports_late_arrivals_and_counts_from_the_schedule(tmp_path: Path) -> None:
    """One stream allowed, arrivals twice as fast as one stream serves them: the client is the
    bottleneck. Arrivals queue in the client; their latency counts from when they were due."""
    with SseServer() as srv:
        doc, output = load(srv.base(ttft=0.03, itl=0.01, n=8), tmp_path, "--scenario", "server", "--rate", "20",
                           "--requests", "30", "--max-concurrency", "1", "--max-tokens", "8")
        sent = measured(srv)
    summary = doc["summary"]
    assert most_in_flight(sent) == 1  # never more than --max-concurrency
    assert summary["late"] > summary["n"] / 2 and summary["late_max_s"] > 0.5
    assert summary["achieved_rps"] < 0.75 * summary["offered_rps"]
    server_ttft = statistics.median((s.tokens[0] - s.t_request) / 1e9 for s in sent)
    assert summary["ttft_p90_s"] > 5 * server_ttft  # the wait in the client is in the latency
    assert "the client could not offer this load" in output


def test_single_stream_is_one_at_a_time_and_offline_all_at_once(tmp_path: Path) -> None:
    """The server's answer (a 0.25 s first token) outlasts what the client spends on a request even
    on a loaded machine, so "all at once" is a throughput the client's own time cannot hide, and the
    first offline answer cannot end before the last offline request is sent."""
    with SseServer() as srv:
        single, _ = load(srv.base(ttft=0.25, itl=0.005, n=4), tmp_path, "--scenario", "single", "--requests", "8",
                         "--max-tokens", "4")
        one_at_a_time = most_in_flight(measured(srv))
    with SseServer() as srv:
        offline, output = load(srv.base(ttft=0.25, itl=0.005, n=4), tmp_path, "--scenario", "offline",
                               "--requests", "12", "--max-tokens", "4")
        together = most_in_flight(measured(srv))
    assert one_at_a_time == 1 and single["bundle"]["run"]["concurrency"] == 1
    assert together == 12 and offline["bundle"]["run"]["concurrency"] == 12
    assert offline["summary"]["requests_per_s"] > 2 * single["summary"]["requests_per_s"]
    assert "TTFT p50" not in output and "throughput" in output  # offline is throughput only


def test_lengths_drawn_from_a_range_reach_the_server_and_the_run_record(tmp_path: Path) -> None:
    with SseServer() as srv:
        doc, _ = load(srv.base(ttft=0.01, itl=0.002), tmp_path, "--scenario", "single", "--requests", "10",
                      "--max-tokens", "2:9", "--gpu-hour-price", "3.6", "--gpus", "2")
    assert doc["bundle"]["run"]["lengths"] == "prompt 256, output 2:9"
    asked = {r["completion_tokens"] for r in doc["bundle"]["stream"]["requests"]}
    assert len(asked) > 2 and min(asked) >= 2 and max(asked) <= 9
    summary = doc["summary"]
    # 3.6 an hour for 2 GPUs is 0.002 a second: per million tokens, 2000 / tokens per second
    assert abs(summary["cost_per_million_output_tokens"] * summary["output_tokens_per_s"] - 2000) < 1e-6


def test_bad_load_flags_are_one_line_before_anything_is_sent(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, message in ((["--scenario", "burst"], "--scenario must be one of"),
                          (["--scenario", "server"], "needs --rate"),
                          (["--prompt-tokens", "9:3"], "--prompt-tokens expects"),
                          (["--gpus", "2"], "give --gpu-hour-price too")):
        result = runner.invoke(app, ["load", "--engine", "http://127.0.0.1:9", *COMMON, *args])
        assert result.exit_code == ExitCode.NO_DIAGNOSIS and message in result.output, result.output
    shapes = tmp_path / "shapes.jsonl"
    shapes.write_text('{"prompt_tokens": 12, "max_tokens": 3}\n{"prompt": 1}\n')
    result = runner.invoke(app, ["load", "--engine", "http://127.0.0.1:9", *COMMON, "--shapes", str(shapes)])
    assert result.exit_code == ExitCode.NO_DIAGNOSIS and "line 2" in result.output


def test_sigterm_stops_sending_at_once_and_still_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "load.json"
    with SseServer() as srv:
        command = [sys.executable, "-m", "doctor", "load", "--engine", srv.base(itl="0.05", n="100000"), *COMMON,
                   "--scenario", "server", "--rate", "2", "--duration", "60", "--json", str(out)]
        code, output, _ = stop_mid_stream(command, srv, signal.SIGTERM)
        sent_after = len(srv.log.requests)
    assert code == ExitCode.INTERRUPTED and "Traceback" not in output, output
    doc = json.loads(out.read_text())
    assert doc["bundle"]["interrupted"] and doc["summary"]["n"] == sent_after  # nothing sent after the signal


def test_with_both_targets_only_the_gateway_is_loaded(tmp_path: Path) -> None:
    """What users call is what is loaded; the engine is there for its /metrics and /version."""
    with SseServer() as engine, SseServer() as gateway:
        out = tmp_path / "load.json"
        CliRunner().invoke(app, ["load", "--engine", engine.base(ttft=0.01), "--gateway", gateway.base(ttft=0.03), *COMMON,
                                 "--scenario", "single", "--requests", "5", "--json", str(out)])
        streamed = (len(measured(engine)), len(measured(gateway)))
    doc = json.loads(out.read_text())
    assert streamed == (0, 5) and doc["summary"]["path"] == "gateway"
    assert list(doc["bundle"]["stream"]["shape"]["paths"]) == ["gateway"]


def test_load_keeps_its_bundle_and_exports_its_summary_as_analyze_reads_it(tmp_path: Path) -> None:
    """``--bundle`` keeps the evidence; the textfile holds the summary's families beside the
    diagnosis' (parsed back with prometheus_client's parser); ``analyze`` of the kept bundle gives
    the same summary and writes the same samples."""
    bundle, prom, again = tmp_path / "load.json.gz", tmp_path / "load.prom", tmp_path / "again.prom"
    with SseServer() as srv:
        doc, output = load(srv.base(ttft=0.02, itl=0.005, n=4), tmp_path, "--scenario", "server", "--rate", "20",
                           "--requests", "30", "--max-tokens", "4", "--region", "eu-west", "--bundle", str(bundle),
                           "--metrics-textfile", str(prom))
    summary = doc["summary"]
    parsed = samples(prom.read_text())
    run = {"region": "eu-west", "scenario": "server"}
    assert value(parsed, "llm_doctor_load_offered_requests_per_second", **run) == 20
    assert value(parsed, "llm_doctor_load_achieved_requests_per_second", **run) == summary["achieved_rps"]
    assert value(parsed, "llm_doctor_load_goodput_requests_per_second", **run) == summary["goodput_rps"]
    assert value(parsed, "llm_doctor_load_good_ratio", **run) == summary["good_fraction"]
    assert value(parsed, "llm_doctor_load_late_arrivals", **run) == summary["late"]
    assert value(parsed, "llm_doctor_load_tpot_p90_seconds", **run) == summary["tpot_p90_s"]  # n = 30: the p90 itself
    ttft = value(parsed, "llm_doctor_load_ttft_p90_seconds", **run)
    assert ttft == summary["ttft_p90_s"] == value(parsed, "llm_doctor_ttft_p90_seconds", path="direct", region="eu-west")
    assert value(parsed, "llm_doctor_load_within_budget", **run) == (0.0 if summary["over_budgets"] else 1.0)
    assert summary["over_budgets"] == [] and "within both" in output  # 20 ms TTFT, 5 ms TPOT: far within the defaults
    assert not any(name == "llm_doctor_load_cost_per_million_output_tokens" for name, _ in parsed)  # no price given
    analyzed = tmp_path / "analyzed.json"
    result = CliRunner().invoke(app, ["analyze", str(bundle), "--json", str(analyzed), "--metrics-textfile", str(again)])
    assert result.exit_code == 0, result.output
    assert json.loads(analyzed.read_text())["summary"] == summary
    assert samples(again.read_text()) == parsed


def test_a_load_run_over_budget_says_so_in_its_summary_and_its_metrics(tmp_path: Path) -> None:
    prom = tmp_path / "load.prom"
    with SseServer() as srv:
        doc, output = load(srv.base(ttft=0.2, itl=0.005, n=4), tmp_path, "--scenario", "single", "--requests", "5",
                           "--max-tokens", "4", "--ttft-budget", "0.1", "--metrics-textfile", str(prom))
    assert doc["summary"]["over_budgets"] == ["ttft"] and "over TTFT" in output
    parsed = samples(prom.read_text())
    assert value(parsed, "llm_doctor_load_within_budget", region="", scenario="single") == 0.0
    assert not any(name == "llm_doctor_load_offered_requests_per_second" for name, _ in parsed)  # a closed loop offers no rate
