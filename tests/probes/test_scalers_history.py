"""``--prometheus``: did the scaler try? A real Prometheus (Debian package) scrapes a real
kube-state-metrics HPA exposition (fixtures/autoscalers/kube-state-metrics/hpa.prom) beside a
recorded real vLLM /metrics scrape (2 requests waiting). First the exposition as recorded (hpa1:
desired 2 = its floor, ceiling 4): the history says the scaler did not try. Then the same
exposition with ``desired_replicas`` raised to 4, as the controller writes it when it scales up
(the only value this test changes): the history says desired rose to the ceiling while the current
replicas stayed at 2, and a ``diagnose --prometheus`` names the HPA in LD609 and LD610."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from doctor.cli import app
from doctor.probes import prometheus
from doctor.scalers.history import read_history
from tests.probes.test_endpoints_probe import send, serve
from tests.support.prometheus import run_prometheus, wait_for

ROOT = Path(__file__).resolve().parents[2]
KSM = (ROOT / "fixtures" / "autoscalers" / "kube-state-metrics" / "hpa.prom").read_text()
VLLM = (ROOT / "fixtures" / "real-vllm" / "lora" / "0.32.0-cpu-two-adapters-one-slot.prom").read_bytes()
DESIRED = re.compile(r'^(kube_horizontalpodautoscaler_status_desired_replicas\{horizontalpodautoscaler="hpa1",namespace="ns1"\}) 2$', re.M)


def samples_of(url: str, expr: str) -> float:
    rows = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=2).json()["data"]["result"]
    return float(rows[0]["value"][1]) if rows else 0.0


@pytest.mark.prometheus
@pytest.mark.slow
def test_the_hpa_history_says_whether_the_scaler_tried(tmp_path: Path) -> None:
    assert DESIRED.search(KSM), "the fixture's hpa1 wants 2 replicas"
    served = {"text": KSM.encode()}
    routes = {"/metrics": lambda h: send(h, 200, served["text"], "text/plain; version=0.0.4")}
    engine_routes = {"/metrics": lambda h: send(h, 200, VLLM, "text/plain; version=0.0.4")}
    with serve(routes) as (ksm, _), serve(engine_routes) as (engine, _), \
            run_prometheus([ksm.split("//")[1], engine.split("//")[1]], tmp_path / "prom",
                           labels={engine.split("//")[1]: {"namespace": "ns1"}}) as url:
        desired = 'kube_horizontalpodautoscaler_status_desired_replicas{horizontalpodautoscaler="hpa1"}'
        wait_for(lambda: samples_of(url, f"count_over_time({desired}[1m])") >= 3, "three scrapes of the recorded exposition")
        evidence, errors = prometheus.query_history(url, since_s=30, namespace="ns1")
        assert errors == []
        quiet = read_history(evidence)
        assert [(h.namespace, h.name, h.floor, h.ceiling) for h in quiet] == [("ns1", "hpa1", 2.0, 4.0)]
        assert "desired stayed at 2 (floor 2, ceiling 4): the scaler did not try" in quiet[0].said()
        assert not quiet[0].rose and quiet[0].at_ceiling_s == 0 and quiet[0].lag_s == 0 and quiet[0].scoped
        # the other generation's names are not asked once the new ones have series
        assert not any("kube_hpa_" in q.expr for q in evidence.queries)
        assert all('namespace="ns1"' in q.expr for q in evidence.queries if q.name.startswith("scaler."))

        served["text"] = DESIRED.sub(r"\1 4", KSM).encode()  # the controller scales up: desired 4 = the ceiling
        wait_for(lambda: samples_of(url, f"count_over_time(({desired} == 4)[1m:1s])") >= 6, "six seconds at the ceiling")
        # without a namespace every HPA of the cluster answers: context, never a finding
        unscoped = CliRunner().invoke(app, ["diagnose", "--prometheus", url, "--since", "60s", "--no-gpu", "--no-host",
                                            "--set", "LD610.min_lag_s=3", "--json", "-"])
        # the engine's series selected in its namespace (as Kubernetes discovery labels them): its HPAs
        result = CliRunner().invoke(app, ["diagnose", "--prometheus", url, "--since", "60s", "--no-gpu", "--no-host",
                                          "--selector", '{namespace="ns1"}', "--set", "LD610.min_lag_s=3", "--json", "-"])
    context = json.loads(unscoped.stdout)
    assert not [f for f in context["findings"] if f["code"] in ("LD609", "LD610")]
    assert any("desired rose 2 -> 4" in r["message"] for r in context["results"] if r["code"] == "LD609")
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    findings = {f["code"]: f for f in report["findings"]}
    history = report["views"]["scalers"]["history"]
    assert [(h["namespace"], h["name"]) for h in history] == [("ns1", "hpa1")]
    stuck = findings["LD609"]
    assert "HorizontalPodAutoscaler ns1/hpa1" in stuck["summary"] and "desired rose 2 -> 4" in stuck["summary"]
    assert "up to 2 request(s) waiting" in stuck["summary"]  # the real vLLM scrape's queue, from the same Prometheus
    assert stuck["remediation"]["setting"] == "spec.maxReplicas" and stuck["remediation"]["current"] == "4"
    assert "Prometheus history (kube_horizontalpodautoscaler_*)" in stuck["remediation"]["where"]
    assert "current replicas below desired" in findings["LD610"]["summary"]
