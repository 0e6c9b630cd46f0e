"""The deployment artefacts: the alerting rules checked and unit-tested by the real ``promtool``
(Debian package ``prometheus``) against the families a recorded run exports, the Grafana
dashboard's queries, the CronJob's scheduling, secret and region fields, and the Dockerfile's
build context and user."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import kubernetes_validate
import pytest
import typer.main
import yaml

from doctor import scalers as scaler_records
from doctor.bundle import load_path
from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.cli import app
from doctor.engine_metrics.metric_names import FAMILIES as VLLM_FAMILIES
from doctor.probes import scalers
from doctor.settings import API_KEY_ENV, BUDGETS
from reports.prometheus_export import FAMILIES, render_metrics
from tests.reports.test_metrics_export import samples
from tests.support import system

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yaml"
CRONJOB = ROOT / "deploy" / "kubernetes" / "cronjob.yaml"
WATCH = ROOT / "deploy" / "kubernetes" / "watch.yaml"
DOCKERFILE = ROOT / "Dockerfile"
DASHBOARD = ROOT / "deploy" / "grafana" / "llm-doctor.json"
KEDA = ROOT / "deploy" / "keda" / "scaledobject.yaml"
PROMTOOL = system.find("promtool")
needs_promtool = system.needs(PROMTOOL, "promtool not found; install the Debian package `prometheus`")


def exported(bundle: str, region: str) -> dict:
    """The samples a recorded run exports, as if it had run in ``region``."""
    report = analyze(load_path(ROOT / "fixtures" / "bundles" / f"realvllm-{bundle}.json.gz"), AnalyzeOptions(), load_registry())
    report.bundle.run.region = region
    return samples(render_metrics(report))


def series(parsed: dict, minutes: int) -> list[dict[str, str]]:
    """promtool input series: every exported sample, constant for ``minutes`` at 1 m steps."""
    out = []
    for (name, labels), value in parsed.items():
        selector = ",".join(f'{k}="{v}"' for k, v in labels)
        out.append({"series": f"{name}{{{selector}}}", "values": f"{value:g}+0x{minutes}"})
    return out


def alerts_firing(tmp_path: Path, parsed: dict, alertnames: list[str]) -> dict[str, list[dict]]:
    """Write a promtool unit test that expects no alert of ``alertnames`` and read back what fired.

    promtool prints the alerts it got when they differ from the expected ones; asking for none
    makes it list each firing alert's labels, which the caller asserts.
    """
    test = {
        "rule_files": [str(ALERTS)],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series(parsed, 40),
                   "alert_rule_test": [{"eval_time": "30m", "alertname": a, "exp_alerts": []} for a in alertnames]}],
    }
    path = tmp_path / "alerts.test.yaml"
    path.write_text(yaml.safe_dump(test))
    result = subprocess.run([PROMTOOL, "test", "rules", str(path)], capture_output=True, text=True, timeout=60)
    fired: dict[str, list[dict]] = {}
    for match in re.finditer(r'alertname: (\w+), time: [^,]+,\s*exp:\[\],\s*\n\s*got:\[(.*?)\]\n', result.stdout + result.stderr, re.S):
        fired[match.group(1)] = [dict(re.findall(r'(\w+)="([^"]*)"', got)) for got in re.findall(r"Labels:\{(.*?)\}", match.group(2))]
    assert result.returncode == (1 if fired else 0), result.stdout + result.stderr
    return fired


@needs_promtool
def test_promtool_accepts_the_rules() -> None:
    result = subprocess.run([PROMTOOL, "check", "rules", str(ALERTS)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


@needs_promtool
def test_the_rules_fire_on_a_queueing_run_and_stay_quiet_on_a_healthy_one(tmp_path) -> None:
    """The rules read the names the exporter writes: a drift in either breaks this test."""
    names = ["LlmDoctorLatencySymptom", "LlmDoctorCriticalFinding", "LlmDoctorCannotDiagnose", "LlmDoctorRequestsFailing"]
    queueing = alerts_firing(tmp_path, exported("queueing", "eu-west"), names)
    assert {n: [(a["region"], a.get("symptom")) for a in alerts] for n, alerts in queueing.items()} == {
        "LlmDoctorLatencySymptom": [("eu-west", "pre-first-token")],
        "LlmDoctorCriticalFinding": [("eu-west", None)],
    }
    assert alerts_firing(tmp_path, exported("healthy", "ap-south"), names) == {}


@needs_promtool
def test_the_gateway_rule_compares_paths_of_one_region(tmp_path) -> None:
    proxy = exported("proxy-buffering", "eu-west")
    key = ("llm_doctor_ttft_p90_seconds", (("path", "gateway"), ("region", "eu-west")))
    direct = proxy[("llm_doctor_ttft_p90_seconds", (("path", "direct"), ("region", "eu-west")))]
    proxy[key] = 3 * direct  # a gateway three times slower to the first token
    fired = alerts_firing(tmp_path, proxy, ["LlmDoctorGatewayAddsTTFT"])
    assert [a["region"] for a in fired["LlmDoctorGatewayAddsTTFT"]] == ["eu-west"]
    proxy[key] = direct
    assert alerts_firing(tmp_path, proxy, ["LlmDoctorGatewayAddsTTFT"]) == {}


def cronjob() -> dict:
    (doc,) = list(yaml.safe_load_all(CRONJOB.read_text()))
    return doc


def test_the_cronjob_matches_the_kubernetes_schema() -> None:
    """Strict: an unknown field (a misspelt ``startingDeadlinSeconds``) fails, as kubectl would refuse it."""
    kubernetes_validate.validate(cronjob(), kubernetes_validate.latest_version(), strict=True)
    misspelt = cronjob()
    misspelt["spec"]["startingDeadlinSeconds"] = misspelt["spec"].pop("startingDeadlineSeconds")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(misspelt, kubernetes_validate.latest_version(), strict=True)


def test_the_cronjob_never_overlaps_and_ends_before_the_next_round() -> None:
    job = cronjob()
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "CronJob")
    spec = job["spec"]
    assert spec["concurrencyPolicy"] == "Forbid"
    every = re.fullmatch(r"\*/(\d+) \* \* \* \*", spec["schedule"])
    assert every, spec["schedule"]
    period_s = int(every.group(1)) * 60
    assert 0 < spec["startingDeadlineSeconds"] < period_s
    assert 0 < spec["jobTemplate"]["spec"]["activeDeadlineSeconds"] < period_s


def test_the_cronjob_takes_the_key_from_a_secret_and_runs_one_region() -> None:
    job = cronjob()
    pod = job["spec"]["jobTemplate"]["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert set(env[API_KEY_ENV]["valueFrom"]["secretKeyRef"]) == {"name", "key"}  # what diagnose reads by default
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    region = job["metadata"]["labels"]["region"]
    assert job["spec"]["jobTemplate"]["metadata"]["labels"]["region"] == region == pod["metadata"]["labels"]["region"]
    assert f"--region={region}" in container["args"]


def test_the_cronjob_arguments_are_diagnose_options() -> None:
    """Every flag in the manifest is one diagnose takes: a renamed flag breaks the manifest here."""
    (container,) = cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    command, *flags = container["args"]
    assert command == "diagnose"
    known = {o for p in typer.main.get_command(app).commands["diagnose"].params for o in p.opts}
    assert {f.split("=", 1)[0] for f in flags} <= known
    assert any(f.startswith(("--pushgateway=", "--metrics-textfile=")) for f in flags)


def dockerfile() -> list[tuple[str, str]]:
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in DOCKERFILE.read_text().splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_image_runs_as_the_user_the_cronjob_expects() -> None:
    users = [arg for op, arg in dockerfile() if op == "USER"]
    assert users, "the image must not run as root"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) != 0  # numeric: runAsNonRoot can verify it
    pod = cronjob()["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == int(uid)
    assert [arg for op, arg in dockerfile() if op == "ENTRYPOINT"] == ['["llm-doctor"]']


@pytest.mark.slow
def test_the_docker_build_context_installs_the_package(tmp_path) -> None:
    """What the Dockerfile copies is enough to build the wheel (no docker daemon needed for that)."""
    context = tmp_path / "context"
    context.mkdir()
    for op, arg in dockerfile():
        if op == "COPY":
            *sources, _dest = shlex.split(arg)
            for source in sources:
                src = ROOT / source
                (shutil.copytree if src.is_dir() else shutil.copy)(src, context / source)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", str(tmp_path), str(context)],
                   check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("llm_doctor-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"doctor", "checks", "reports"}
    assert any(n.startswith("reports/templates/") for n in names)


def dashboard_queries() -> dict[str, str]:
    dashboard = json.loads(DASHBOARD.read_text())
    return {f"{panel['title']} {t['refId']}": t["expr"] for panel in dashboard["panels"] for t in panel["targets"]}


def test_the_dashboard_shows_every_exported_family_and_no_other() -> None:
    used = {name for expr in dashboard_queries().values() for name in re.findall(r"\bllm_doctor_\w+", expr)}
    assert used == set(FAMILIES)
    assert all('region=~"$region"' in expr for expr in dashboard_queries().values())  # the region picker filters every panel


@needs_promtool
def test_promtool_parses_every_dashboard_query(tmp_path) -> None:
    """Each query as a recording rule: ``promtool check rules`` parses its PromQL."""
    rules = [{"record": f"llm_doctor:dashboard_{i}", "expr": expr.replace("$region", ".*")}
             for i, expr in enumerate(dashboard_queries().values())]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(rules)} rules found" in result.stdout


def watch_manifests() -> dict[str, dict]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(WATCH.read_text())}


def test_the_watch_deployment_and_service_match_the_kubernetes_schema() -> None:
    docs = watch_manifests()
    assert set(docs) == {"Deployment", "Service", "ServiceMonitor"}
    for kind in ("Deployment", "Service"):  # the ServiceMonitor is a CRD: no built-in schema
        kubernetes_validate.validate(docs[kind], kubernetes_validate.latest_version(), strict=True)


def test_the_service_monitor_scrapes_the_watch_it_selects() -> None:
    docs = watch_manifests()
    deployment, service, monitor = docs["Deployment"], docs["Service"], docs["ServiceMonitor"]
    pod = deployment["spec"]["template"]
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "Recreate"  # never two probers
    assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    (container,) = pod["spec"]["containers"]
    command, *flags = container["args"]
    assert command == "watch"
    known = {o for p in typer.main.get_command(app).commands["watch"].params for o in p.opts}
    assert {f.split("=", 1)[0] for f in flags} <= known
    listen_port = int(next(f for f in flags if f.startswith("--listen=")).rsplit(":", 1)[1])
    (port,) = container["ports"]
    assert port["containerPort"] == listen_port and service["spec"]["ports"][0]["targetPort"] == port["name"]
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == [port["name"]]
    assert f"--region={pod['metadata']['labels']['region']}" in flags


@needs_promtool
def test_the_outage_and_canary_rules_read_the_target_labels(tmp_path) -> None:
    healthy = exported("healthy", "eu-west")
    assert alerts_firing(tmp_path, healthy, ["LlmDoctorTargetDown", "LlmDoctorCanarySlower"]) == {}
    up = ("llm_doctor_target_up", (("path", "direct"), ("region", "eu-west")))
    down = {**healthy, up: 0.0}
    assert [a["path"] for a in alerts_firing(tmp_path, down, ["LlmDoctorTargetDown"])["LlmDoctorTargetDown"]] == ["direct"]

    def as_target(parsed: dict, target: str, factor: float = 1.0) -> dict:
        return {(name, tuple(sorted((*labels, ("target", target))))): v * (factor if name == "llm_doctor_ttft_p90_seconds" else 1)
                for (name, labels), v in parsed.items()}

    slower = {**as_target(healthy, "stable"), **as_target(healthy, "canary", 2.0)}
    fired = alerts_firing(tmp_path, slower, ["LlmDoctorCanarySlower"])
    assert [(a["region"], a["path"]) for a in fired["LlmDoctorCanarySlower"]] == [("eu-west", "direct")]
    alike = {**as_target(healthy, "stable"), **as_target(healthy, "canary")}
    assert alerts_firing(tmp_path, alike, ["LlmDoctorCanarySlower"]) == {}


def scaled_object() -> dict:
    return yaml.safe_load(KEDA.read_text())


def test_the_scaled_object_scales_the_engine_on_its_queue_per_replica_and_its_ttft() -> None:
    scaled = scaled_object()
    assert (scaled["apiVersion"], scaled["kind"]) == ("keda.sh/v1alpha1", "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["kind"] == "Deployment"
    assert 1 <= scaled["spec"]["minReplicaCount"] < scaled["spec"]["maxReplicaCount"]
    triggers = {t["name"]: t for t in scaled["spec"]["triggers"]}
    assert {t["type"] for t in triggers.values()} == {"prometheus"}
    queue, ttft = triggers["queue-per-replica"], triggers["ttft-p95"]
    assert queue["metricType"] == "AverageValue"  # KEDA divides the fleet's queue by the replicas: a per-replica depth
    # the vLLM families llm-doctor itself reads (doctor/engine_metrics/metric_names.py), so the names are the engine's own
    engine_names = {name for family in VLLM_FAMILIES for name in family.names}
    for trigger in (queue, ttft):
        used = set(re.findall(r"vllm:[a-z_]+?(?=_bucket\b|\{|\)|$)", trigger["metadata"]["query"]))
        assert used and used <= engine_names, used
    assert "vllm:num_requests_waiting" in queue["metadata"]["query"]
    assert ttft["metricType"] == "Value" and float(ttft["metadata"]["threshold"]) == BUDGETS.ttft_s  # the default budget


@needs_promtool
def test_promtool_parses_the_scaled_object_queries(tmp_path) -> None:
    rules = [{"record": f"keda:{t['name'].replace('-', '_')}", "expr": t["metadata"]["query"]} for t in scaled_object()["spec"]["triggers"]]
    path = tmp_path / "keda-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "keda", "rules": rules}]}))
    result = subprocess.run([PROMTOOL, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_fleet_role_grants_what_the_kubernetes_probe_asks_and_no_more() -> None:
    docs = {doc["kind"]: doc for doc in yaml.safe_load_all((ROOT / "deploy" / "kubernetes" / "fleet-rbac.yaml").read_text())}
    assert set(docs) == {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)

    def granted(role: str) -> set[tuple[str, str, str]]:
        return {(group, resource, verb) for rule in docs[role]["rules"] for group in rule["apiGroups"]
                for resource in rule["resources"] for verb in rule["verbs"]}

    # the autoscalers' live read: what its own request list asks, derived from the scaler records
    assert {(g, r, "list") for record in scaler_records.RECORDS for g, r, _ in record.resources} <= set(scalers.requests())
    assert granted("Role") == {("", "services", "get"), ("discovery.k8s.io", "endpointslices", "list"),
                               ("networking.k8s.io", "ingresses", "list"), *scalers.requests()}
    assert granted("ClusterRole") == {("networking.k8s.io", "ingressclasses", "get")}  # cluster-scoped
    source = (ROOT / "doctor" / "probes" / "kubernetes.py").read_text()
    assert "/api/v1/namespaces/{ns}/services/{svc}" in source and "/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices" in source
    ingress = (ROOT / "doctor" / "probes" / "ingress.py").read_text()
    assert '"/apis/networking.k8s.io/v1"' in ingress and "/namespaces/{quote(namespace)}/ingresses" in ingress
    assert "/ingressclasses/{quote(klass)}" in ingress
    for role, binding in (("Role", "RoleBinding"), ("ClusterRole", "ClusterRoleBinding")):
        assert docs[binding]["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role,
                                            "name": docs[role]["metadata"]["name"]}
        assert docs[binding]["subjects"][0]["name"] == docs["ServiceAccount"]["metadata"]["name"]
