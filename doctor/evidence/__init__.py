"""The evidence bundle: everything one run gathered, typed, versioned and re-analysable.

One JSON document (optionally gzipped, or embedded in the HTML report). Raw inputs stay raw
(matched log lines, /metrics text, per-read stream logs) so a newer parser or check can
re-analyse an old bundle. Each evidence kind is ``None`` when its probe did not run; a probe
that ran and failed leaves an ``EvidenceError`` in ``errors`` (with ``fatal=True`` when the
kind is unusable).

Bump ``SCHEMA_VERSION`` when a field changes meaning or is removed; adding an optional field
does not need a bump (old bundles load with the default).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.evidence.endpoints import Endpoint, EndpointsEvidence, EngineInfo, ModelInfo
from doctor.evidence.errors import EvidenceError
from doctor.evidence.ingress import IngressEvidence, IngressInfo
from doctor.evidence.log import LogEvidence, LogLine
from doctor.evidence.machine import (
    GpuDevice,
    GpuEvidence,
    GpuProcess,
    HostEvidence,
    NvLink,
    ProcessInfo,
    XidEvent,
    XidWatch,
)
from doctor.evidence.metrics import MetricsEvidence, PrometheusEvidence, PromQuery, Scrape
from doctor.evidence.model_config import ModelConfigEvidence
from doctor.evidence.router import ReplicaScrapes, RouterEvidence
from doctor.evidence.run import RunRecord
from doctor.evidence.scaling import PodState, ScalerObject, ScalingEvidence
from doctor.evidence.stream import (
    ClientHealth,
    ProbePath,
    ProbeShape,
    ReadRecord,
    RequestTrace,
    StreamEvidence,
    TokenEvent,
    WedgeStop,
)
from doctor.evidence.traces import Span, TraceEvidence

SCHEMA_VERSION = 1

#: Evidence kinds a check may name as a parameter, mapped to the Bundle attribute holding them.
RAW_KINDS: tuple[str, ...] = (
    "run",
    "stream",
    "log",
    "metrics",
    "prometheus",
    "endpoints",
    "gpu",
    "host",
    "model_config",
    "scaling",
    "traces",
    "router",
)


@dataclass
class Bundle:
    """Everything one run collected, raw, and the one input of analysis: what a check, a view and a
    report are computed from, and what ``llm-doctor analyze`` re-reads from a file or a report.

    Each evidence kind is ``None`` when it was not collected (not asked for, or its probe failed:
    ``errors`` says why, per ``source``), so a check tells "no scrape" from "nothing happened".
    Kinds stay raw (log lines, /metrics text, request traces) and are parsed at analysis time, so a
    newer llm-doctor re-reads an old bundle with what it knows then. ``run`` records how the run was
    made and analysed, ``redactions`` how many values of each rule were masked before anything was
    stored, and ``interrupted`` that the collection was cut short (Ctrl-C, SIGTERM), so a report
    never passes a partial run off as a finished one. ``schema_version`` gates reading old files."""

    schema_version: int = SCHEMA_VERSION
    tool_version: str = ""
    created_at: str = ""
    run: RunRecord = field(default_factory=RunRecord)
    stream: StreamEvidence | None = None
    log: LogEvidence | None = None
    metrics: MetricsEvidence | None = None
    prometheus: PrometheusEvidence | None = None
    endpoints: EndpointsEvidence | None = None
    ingress: IngressEvidence | None = None  # in a pod: the Ingress in front of --gateway
    gpu: GpuEvidence | None = None
    host: HostEvidence | None = None
    model_config: ModelConfigEvidence | None = None  # --model-dir: the served model's config.json
    scaling: ScalingEvidence | None = None  # the autoscalers of the workload (k8s://) or of `llm-doctor scaling`
    traces: TraceEvidence | None = None  # --otlp-listen: the spans the engine and gateway exported
    router: RouterEvidence | None = None  # the router between the gateway and the replicas (--router)
    errors: list[EvidenceError] = field(default_factory=list)
    redactions: dict[str, int] = field(default_factory=dict)  # rule -> values redacted
    interrupted: bool = False

    def errors_for(self, source: str) -> list[EvidenceError]:
        return [e for e in self.errors if e.source == source]


__all__ = [
    "RAW_KINDS",
    "SCHEMA_VERSION",
    "Bundle",
    "ClientHealth",
    "Endpoint",
    "EndpointsEvidence",
    "EngineInfo",
    "EvidenceError",
    "GpuDevice",
    "GpuEvidence",
    "GpuProcess",
    "HostEvidence",
    "IngressEvidence",
    "IngressInfo",
    "LogEvidence",
    "LogLine",
    "MetricsEvidence",
    "ModelConfigEvidence",
    "ModelInfo",
    "NvLink",
    "PodState",
    "ProbePath",
    "ProbeShape",
    "ProcessInfo",
    "PromQuery",
    "PrometheusEvidence",
    "ReadRecord",
    "ReplicaScrapes",
    "RequestTrace",
    "RouterEvidence",
    "RunRecord",
    "ScalerObject",
    "ScalingEvidence",
    "Scrape",
    "Span",
    "StreamEvidence",
    "TokenEvent",
    "TraceEvidence",
    "WedgeStop",
    "XidEvent",
    "XidWatch",
]
