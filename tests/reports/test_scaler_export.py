"""The metrics export of a run that read an autoscaler: its bounds and state, its scaling findings."""

from __future__ import annotations

from reports.prometheus_export import render_metrics
from tests.support.scaler_incident import incident


def test_the_metrics_export_carries_the_scaler_and_its_findings_only_when_one_was_read() -> None:
    with_scaler = render_metrics(incident())
    assert 'llm_doctor_scaler_replicas{bound="max",object="HorizontalPodAutoscaler serving/vllm",region=""} 2.0' in with_scaler
    assert 'llm_doctor_scaler_replicas{bound="desired",object="HorizontalPodAutoscaler serving/vllm",region=""} 2.0' in with_scaler
    assert 'llm_doctor_scaler_finding{code="LD609",region="",severity="warning"} 1.0' in with_scaler
    assert "llm_doctor_scaler_" not in render_metrics(incident(scaler=False))
