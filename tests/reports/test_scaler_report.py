"""The reports of a run that read an autoscaler: the metrics export and the HTML section."""

from __future__ import annotations

from reports.prometheus_export import render_metrics
from tests.support.scaler_incident import incident


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
