"""The reports of a run that read an autoscaler: the metrics export, the HTML section, and
``llm-doctor scaling``'s table and JSON document, each from the ``scalers`` view read back."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path

from rich.console import Console

from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.commands.scaling import gather
from doctor.evidence import Bundle
from doctor.model import Report
from reports.prometheus_export import render_metrics
from reports.scaling_report import print_scaling, render_scaling_json
from tests.support.scaler_incident import incident

ROOT = Path(__file__).resolve().parents[2]


def test_the_metrics_export_carries_the_scaler_and_its_findings_only_when_one_was_read() -> None:
    with_scaler = render_metrics(incident())
    assert 'llm_doctor_scaler_replicas{bound="max",object="HorizontalPodAutoscaler serving/vllm",region=""} 2.0' in with_scaler
    assert 'llm_doctor_scaler_replicas{bound="desired",object="HorizontalPodAutoscaler serving/vllm",region=""} 2.0' in with_scaler
    assert 'llm_doctor_scaler_finding{code="LD609",region="",severity="warning"} 1.0' in with_scaler
    assert "llm_doctor_scaler_" not in render_metrics(incident(scaler=False))


def test_the_html_shows_the_scaler_and_its_replicas_over_the_window_escaped() -> None:
    from reports.html_page import render_html

    report = incident()
    report.views["scalers"]["history"] = [{"namespace": "serving", "name": "<script>x</script>", "metric": "kube_horizontalpodautoscaler",
                                           "floor": 1, "ceiling": 4, "desired": [[0.0, 2.0], [30.0, 4.0]], "current": [[0.0, 2.0], [30.0, 2.0]]}]
    page = render_html(report)
    section = page[page.index('<section id="scaling">'):]
    section = section[:section.index("</section>")]
    assert "HorizontalPodAutoscaler serving/vllm" in section and "ScalingLimited=True" in section
    assert section.count("<svg") == 1 and "<script>x" not in page and "&lt;script&gt;x" in section


def scaling_report(path: Path) -> Report:
    """The report ``llm-doctor scaling PATH`` prints: every object read, judged by the LD6xx checks."""
    return analyze(Bundle(tool_version="test", scaling=gather([str(path)])), AnalyzeOptions(select=["LD6"]))


def test_the_scaling_document_writes_the_view_it_read_back_and_the_table_shows_each_object() -> None:
    report = scaling_report(ROOT / "fixtures" / "autoscalers")
    document = json.loads(render_scaling_json(report))
    for key in ("scalers", "skipped", "problems"):  # the dataclasses written out again are the view's JSON, byte for byte
        assert json.dumps(document[key]) == json.dumps(report.views["scalers"][key]), key
    assert len(document["scalers"]) >= 25 and document["problems"]  # the Helm template is said, not read
    console = Console(file=io.StringIO(), width=400)
    print_scaling(report, console, verbose=True)
    printed = console.file.getvalue()
    row = next(line.split() for line in printed.splitlines() if line.startswith("HorizontalPodAutoscaler php-apache "))
    # the Kubernetes docs' HPA with its status: floor, ceiling, signals, the default scale-down, current/desired
    assert row[2:6] == ["1", "10", "cpu", "Utilization"] and row[-4:] == ["300", "(default)", "1/1", "replicas"], row
    assert all(f"{s['kind']} " in printed for s in document["scalers"])


def test_a_scalers_view_that_does_not_read_back_is_no_scaler_not_a_traceback() -> None:
    report = scaling_report(ROOT / "fixtures" / "autoscalers" / "production-stack--hpa-10.yaml")
    damaged = dataclasses.replace(report, views={**report.views, "scalers": {**report.views["scalers"], "scalers": [{"kind": 7}]}})
    console = Console(file=io.StringIO(), width=200)
    print_scaling(damaged, console)
    printed = console.file.getvalue()
    assert "NO SCALER" in printed and "not read: scalers could not be read" in printed, printed
    document = json.loads(render_scaling_json(damaged))
    assert document["scalers"] == [] and document["problems"][0].startswith("scalers could not be read"), document
    assert "llm_doctor_scaler_replicas" not in render_metrics(damaged) and "llm_doctor_scaler_replicas" in render_metrics(report)
