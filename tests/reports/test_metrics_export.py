"""The exported families (``reports.prometheus_export``): the textfile from a recorded bundle
analysed offline, parsed back with prometheus_client's own parser, and a push received by a real
Pushgateway (Debian package ``prometheus-pushgateway``) from a live ``diagnose``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import httpx
import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.cli import app
from doctor.model import Severity, Symptom
from doctor.runs.sweep_knee import EngineFacts, conclude
from reports.prometheus_export import BINDINGS, FAMILIES, sweep_registry
from tests.probes.test_metrics_prometheus import free_port, wait_for
from tests.runs.test_sweep_knee import BUDGETS as KNEE_BUDGETS
from tests.runs.test_sweep_knee import level as knee_level
from tests.support import system
from tests.support.sse_server import SseServer

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "bundles"
PUSHGATEWAY = system.find("prometheus-pushgateway")


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(family, sorted labels) -> value, read with prometheus_client's parser."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text) for s in family.samples
    }


def value(parsed: dict, name: str, **labels: str) -> float:
    return parsed[(name, tuple(sorted(labels.items())))]


def test_textfile_of_a_recorded_bundle_holds_its_report(tmp_path) -> None:
    """analyze --metrics-textfile on a real vLLM queueing run: every family, the report's numbers."""
    source = FIXTURES / "realvllm-queueing.json.gz"
    out = tmp_path / "llm_doctor.prom"
    result = CliRunner().invoke(app, ["analyze", str(source), "--metrics-textfile", str(out), "--json", str(tmp_path / "r.json")])
    assert result.exit_code == 1, result.output  # the queueing run is a symptom
    assert sorted(tmp_path.iterdir()) == [out, tmp_path / "r.json"]  # the temporary file was renamed, not left
    parsed = samples(out.read_text())
    assert {name for name, _ in parsed} == set(FAMILIES)

    report = analyze(load_path(source), AnalyzeOptions(), load_registry())
    direct = report.views["stream_stats"]["paths"]["direct"]
    region = ""  # the recorded run gave no region: the label is there, empty
    assert value(parsed, "llm_doctor_ttft_p90_seconds", path="direct", region=region) == pytest.approx(direct["ttft_felt"]["p90"])
    assert value(parsed, "llm_doctor_ttft_p95_seconds", path="direct", region=region) == pytest.approx(direct["ttft_felt"]["p95"])
    assert direct["ttft_felt"]["p90"] <= direct["ttft_felt"]["p95"] <= direct["ttft_felt"]["max"]
    assert value(parsed, "llm_doctor_requests_waiting_max", region=region) == 7.0  # the queue vllm:num_requests_waiting built
    assert value(parsed, "llm_doctor_target_up", path="direct", region=region) == 1.0
    assert value(parsed, "llm_doctor_tpot_p90_seconds", path="direct", region=region) == pytest.approx(direct["tpot"]["p90"])
    assert value(parsed, "llm_doctor_itl_max_seconds", path="direct", region=region) == pytest.approx(direct["itl"]["max"])
    assert value(parsed, "llm_doctor_requests_failed_ratio", path="direct", region=region) == 0.0
    assert {s.value: value(parsed, "llm_doctor_verdict", symptom=s.value, region=region) for s in Symptom} == {
        s.value: 1.0 if s is Symptom.PRE_FIRST_TOKEN else 0.0 for s in Symptom}
    assert {s.value: value(parsed, "llm_doctor_findings", severity=s.value, region=region) for s in Severity} == {
        "info": 3.0, "warning": 1.0, "critical": 1.0}
    assert value(parsed, "llm_doctor_run_duration_seconds", region=region) == 12.0  # 07:45:33 -> 07:45:45
    assert value(parsed, "llm_doctor_run_timestamp_seconds", region=region) == datetime(2026, 11, 30, 7, 45, 45, tzinfo=timezone.utc).timestamp()
    assert value(parsed, "llm_doctor_up", region=region) == 1.0


def test_gateway_path_and_failures_are_per_path(tmp_path) -> None:
    """A live run with a failing gateway: its failed ratio is 1 and it has no latency to export."""
    out = tmp_path / "m.prom"
    with SseServer() as srv:
        result = CliRunner().invoke(app, [
            "diagnose", "--engine", srv.base(itl=0.001, n=4), "--gateway", srv.base(fail="status"), "--region", "eu-west",
            "--requests", "3", "--warmup", "0", "--route", "chat", "--no-gpu", "--no-host", "--no-metrics",
            "--json", str(tmp_path / "r.json"), "--metrics-textfile", str(out)])
    assert out.exists(), result.output
    parsed = samples(out.read_text())
    assert value(parsed, "llm_doctor_requests_failed_ratio", path="gateway", region="eu-west") == 1.0
    assert value(parsed, "llm_doctor_requests_failed_ratio", path="direct", region="eu-west") == 0.0
    assert ("llm_doctor_ttft_p90_seconds", (("path", "direct"), ("region", "eu-west"))) in parsed
    assert ("llm_doctor_ttft_p90_seconds", (("path", "gateway"), ("region", "eu-west"))) not in parsed  # no answer, no 0 s


def test_a_missing_textfile_folder_fails_before_the_probe(tmp_path) -> None:
    with SseServer() as srv:
        result = CliRunner().invoke(app, ["diagnose", "--engine", srv.base(), "--no-gpu", "--no-host",
                                          "--metrics-textfile", str(tmp_path / "nowhere" / "m.prom")])
        assert not srv.log.requests  # nothing was sent
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


@pytest.fixture
def pushgateway(tmp_path) -> Iterator[str]:
    if PUSHGATEWAY is None:
        system.missing("prometheus-pushgateway not found; install the Debian package `prometheus-pushgateway`")
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen([PUSHGATEWAY, f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: httpx.get(f"{url}/-/ready", timeout=2).status_code == 200, "Pushgateway ready")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@system.needs(PUSHGATEWAY, "prometheus-pushgateway not found; install the Debian package `prometheus-pushgateway`")
def test_diagnose_pushes_to_a_real_pushgateway(tmp_path, pushgateway) -> None:
    with SseServer() as srv:
        result = CliRunner().invoke(app, [
            "diagnose", "--engine", srv.base(itl=0.001, n=4), "--region", "ap-south", "--requests", "3", "--warmup", "0",
            "--route", "chat", "--no-gpu", "--no-host", "--no-metrics", "--json", str(tmp_path / "r.json"),
            "--pushgateway", pushgateway])
    assert "pushed the metrics" in result.stderr, result.output
    parsed = samples(httpx.get(f"{pushgateway}/metrics", timeout=5).text)
    grouped = {"job": "llm-doctor", "instance": "", "region": "ap-south"}  # the Pushgateway adds job and instance
    assert value(parsed, "llm_doctor_up", **grouped) == 1.0
    assert value(parsed, "llm_doctor_verdict", symptom="healthy", **grouped) == 1.0
    assert value(parsed, "llm_doctor_ttft_p90_seconds", path="direct", **grouped) > 0


def test_an_unreachable_pushgateway_is_a_warning_not_a_crash(tmp_path) -> None:
    with SseServer() as srv:
        result = CliRunner().invoke(app, [
            "diagnose", "--engine", srv.base(itl=0.001, n=4), "--requests", "2", "--warmup", "0", "--route", "chat",
            "--no-gpu", "--no-host", "--no-metrics", "--json", str(tmp_path / "r.json"),
            "--pushgateway", f"http://127.0.0.1:{free_port()}"])
    assert result.exit_code == 0, result.output  # the diagnosis's own code
    assert "could not push the metrics" in result.stderr


@system.needs(PUSHGATEWAY, "prometheus-pushgateway not found; install the Debian package `prometheus-pushgateway`")
def test_a_load_run_pushes_under_its_own_job_and_leaves_the_diagnosis_in_place(tmp_path, pushgateway) -> None:
    """A push replaces its whole group: the load run's own job keeps the diagnosis' numbers."""
    common = ["--region", "ap-south", "--warmup", "0", "--no-gpu", "--no-host", "--no-metrics", "--pushgateway", pushgateway]
    with SseServer() as srv:
        diagnosed = CliRunner().invoke(app, ["diagnose", "--engine", srv.base(itl=0.001, n=4), "--requests", "3",
                                             "--json", str(tmp_path / "d.json"), *common])
        loaded = CliRunner().invoke(app, ["load", "--engine", srv.base(itl=0.001, n=4), "--scenario", "server", "--rate", "20",
                                          "--requests", "10", "--json", str(tmp_path / "l.json"), *common])
    assert "pushed the metrics" in diagnosed.stderr and "pushed the metrics" in loaded.stderr, loaded.output
    parsed = samples(httpx.get(f"{pushgateway}/metrics", timeout=5).text)
    group = {"instance": "", "region": "ap-south"}
    assert value(parsed, "llm_doctor_up", job="llm-doctor", **group) == 1.0  # still there after the load run's push
    assert value(parsed, "llm_doctor_up", job="llm-doctor-load", **group) == 1.0
    assert value(parsed, "llm_doctor_load_offered_requests_per_second", job="llm-doctor-load", scenario="server", **group) == 20
    assert not any(dict(labels).get("job") == "llm-doctor" for name, labels in parsed if name.startswith("llm_doctor_load_"))


def test_a_concurrency_sweeps_families_give_the_knee_in_streams_and_the_setting_now() -> None:
    """From a ``SweepResult`` alone: the knee in its own unit, one binding set, the setting, and
    the engine's max_num_seqs when it said it (here its limit of 8 is above a knee of 4 that KV
    pressure set: replicas)."""
    engine = EngineFacts(running_max=6, waiting_max=0, kv_usage_max=0.97, preemptions=3, max_num_seqs=8, max_num_seqs_source="log")
    levels = [knee_level(1, 0.1, 0.01, engine), knee_level(2, 0.1, 0.01, engine), knee_level(4, 0.2, 0.02, engine),
              knee_level(8, 0.9, 0.03, engine), knee_level(6, 0.7, 0.03, engine), knee_level(5, 0.6, 0.03, engine)]
    result = conclude(levels, KNEE_BUDGETS, "concurrency", 16, {"region": "eu-west"})
    parsed = samples(generate_latest(sweep_registry(result)).decode())
    run = {"region": "eu-west", "by": "concurrency"}
    assert value(parsed, "llm_doctor_sweep_knee_streams", **run) == 4
    assert [b for b in BINDINGS if value(parsed, "llm_doctor_sweep_binding", budget=b, **run) == 1] == ["ttft"]
    assert result.recommendation.setting == "replicas"
    assert value(parsed, "llm_doctor_sweep_recommended", setting="replicas", **run) == 4  # 16 streams / a knee of 4
    assert value(parsed, "llm_doctor_sweep_max_num_seqs", **run) == 8
    assert value(parsed, "llm_doctor_sweep_levels", **run) == 6
