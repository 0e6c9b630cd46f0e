"""``llm-doctor scaling`` on the real autoscaler objects of fixtures/autoscalers/ (INDEX.md gives
each one's source and what a careful reader sees): each file's findings, by code and field, are
held by a snapshot, and the readings the INDEX states are asserted outright."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OBJECTS = ROOT / "fixtures" / "autoscalers"
SNAPSHOT = OBJECTS / "findings.snap.json"
FILES = sorted(p for p in OBJECTS.glob("*.yaml"))


@functools.cache
def _run(args: tuple[str, ...]) -> tuple[int, str, str]:
    """One ``llm-doctor scaling`` process per distinct command line, per session: the snapshot's run
    of a file also serves the tests that read that file again (a process is most of a second)."""
    done = subprocess.run([sys.executable, "-m", "doctor", "scaling", *args, "--json", "-"], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    return done.returncode, done.stdout, done.stderr


def scaling(*args: str) -> tuple[int, dict, str]:
    code, stdout, stderr = _run(args)
    return code, json.loads(stdout) if stdout.strip() else {}, stderr  # parsed afresh: no test changes the next one's


def findings_of(path: Path) -> list[str]:
    _, doc, _ = scaling(str(path))
    return sorted(f"{f['code']} {f['name']} @ {f['remediation']['setting']}" for f in doc.get("findings", []))


def test_at_least_25_real_objects_of_six_products_are_read() -> None:
    _, doc, _ = scaling(str(OBJECTS))
    products = {s["product"] for s in doc["scalers"]}
    assert len(doc["scalers"]) >= 25
    assert products == {"hpa", "keda", "knative", "kserve", "aibrix", "ray-serve"}


@pytest.mark.slow
def test_each_real_object_is_judged_as_its_snapshot_says(request: pytest.FixtureRequest) -> None:
    # one process per file, as many at once as this process may use cores (a container's, not the host's), 4 at most
    with ThreadPoolExecutor(max_workers=min(4, len(os.sched_getaffinity(0)))) as pool:
        got = {p.name: findings for p, findings in zip(FILES, pool.map(findings_of, FILES), strict=True)}
    if request.config.getoption("--update-snapshots", default=False):
        SNAPSHOT.write_text(json.dumps(got, indent=1, sort_keys=True) + "\n")
    assert got == json.loads(SNAPSHOT.read_text())


@pytest.mark.parametrize(("name", "code", "setting"), [
    ("aibrix--deepseek-r1-autoscaling.yaml", "LD605", "spec.metricsSources[0].targetValue"),  # 50 on a 0-1 gauge
    ("aibrix--kpa.yaml", "LD604", "spec.metricsSources[0].targetMetric"),  # gpu_cache_usage_perc, gone from vLLM 0.12
    ("gke-samples--vllm-tpu-vllm-hpa.yaml", "LD604", "spec.metrics[0].pods.metric.name"),
    ("gke-samples--t5-torchserve-hpa.yaml", "LD603", "spec.metrics[0].pods.metric.name"),  # a |counter metric
    ("gke-samples--keda-ollama-httpscaledobject.yaml", "LD602", "spec.replicas.min"),
    ("llm-d-wva--keda-scaled-object-vllme.yaml", "LD602", "spec.minReplicaCount"),  # left out: KEDA's default 0
    ("production-stack--keda-scaledobject-tutorial20.yaml", "LD604", "spec.triggers[0].metadata.ignoreNullValues"),
    ("k8s-examples--vllm-gemma-requests-running-hpa.yaml", "LD606", "spec.behavior.scaleDown.stabilizationWindowSeconds"),
    ("aibrix--apa-resource.yaml", "LD601", "spec.metricsSources[0].targetMetric"),
])
def test_a_careful_readers_finding_is_made(name: str, code: str, setting: str) -> None:
    assert any(f.startswith(code) and f.endswith(f"@ {setting}") for f in findings_of(OBJECTS / name))


@pytest.mark.parametrize("name", ["accelerated-platforms--hpa-vllm-openai-queue-size.yaml", "aibrix--apa.yaml",
                                  "gke-samples--llm-multihost-gpus-vllm-hpa.yaml", "aibrix--multimetrics-apa.yaml"])
def test_a_sound_object_has_no_finding(name: str) -> None:
    code, doc, _ = scaling(str(OBJECTS / name))
    assert (code, doc["findings"]) == (0, [])


def test_the_knative_batch_limit_is_read_from_the_services_own_command_line() -> None:
    _, doc, _ = scaling(str(OBJECTS / "gke-kueue-dws--knative-gemma3-vllm-max-num-seqs-4.yaml"))
    unreachable = next(f for f in doc["findings"] if f["code"] == "LD605")
    assert "runs 4 at once" in unreachable["summary"] and "96 wait" in unreachable["summary"]


def test_a_helm_template_is_one_line_and_exit_2() -> None:
    code, doc, stderr = scaling(str(OBJECTS / "helm-template-production-stack--scaledobject-vllm.yaml"))
    assert code == 2 and "Traceback" not in stderr
    assert doc["scalers"] == [] and "render it first with `helm template`" in doc["problems"][0]


def test_the_projects_own_examples_pass_its_checks() -> None:
    code, doc, _ = scaling(str(ROOT / "deploy"))
    assert code == 0 and doc["findings"] == []
    assert {(s["kind"], s["product"]) for s in doc["scalers"]} == {("HorizontalPodAutoscaler", "hpa"), ("ScaledObject", "keda")}


def test_findings_carry_what_a_diagnosis_reports_findings_carry() -> None:
    code, doc, _ = scaling(str(OBJECTS / "llm-d-wva--keda-scaled-object-vllme.yaml"))
    assert code == 1
    keys = {"code", "name", "severity", "summary", "remediation", "evidence", "symptom", "cause", "felt"}
    assert all(keys <= set(f) for f in doc["findings"]) and {f["symptom"] for f in doc["findings"]} == {"scaling"}


def test_the_real_vllm_startup_log_gives_the_cold_start_in_seconds() -> None:
    """The real vLLM 0.32.0 startup log (fixtures/logs/) measures the start-up the floor and window rules quote."""
    log = ROOT / "fixtures" / "logs" / "startup-0.32.0-cpu-default.log"
    _, doc, _ = scaling(str(OBJECTS / "gke-samples--keda-ollama-httpscaledobject.yaml"), "--log", str(log))
    floor = next(f for f in doc["findings"] if f["code"] == "LD602")
    assert "at least 62 s (the startup log's engine initialisation)" in floor["summary"]
