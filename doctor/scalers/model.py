"""What an autoscaler decides, whatever product it is: the neutral shape every scaler record reads
its objects into, and every scaling check reads.

A Kubernetes HorizontalPodAutoscaler, a KEDA ScaledObject, a Knative Service's annotations, a
KServe InferenceService, an AIBrix PodAutoscaler and a Ray Serve deployment each spell the same
few decisions differently: a floor and a ceiling of replicas, the signals that add replicas and
the number each aims at, how fast replicas go away again, and what an absent signal means. A
check asks those questions once, here, and names the field at fault by its path in the object the
user wrote (``spec.metrics[0].resource.name``), so a finding reads in the product's own words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from doctor.evidence.scaling import PodState
from doctor.scalers.history import ScalerHistory

#: ``${NAME}`` or ``$NAME`` placeholders an envsubst-style template leaves in a value.
PLACEHOLDER = re.compile(r"\$\{[^}]*\}|\$[A-Z_][A-Z0-9_]*")


@dataclass(frozen=True)
class Knob:
    """One field of a scaler: its value, its path in the object, and whether the object sets it
    (``explicit`` False: the product's default applies, and ``value`` is that default).
    ``placeholder``: the ``${...}`` text standing where a value should be: an unknown value, which
    no rule may judge (``known``)."""

    path: str
    value: Any = None
    explicit: bool = True
    placeholder: str | None = None
    shown: str | None = None  # how to quote a value derived from several fields ("0s + the 60s stable window")

    @property
    def known(self) -> bool:
        return self.placeholder is None and self.value is not None

    def number(self) -> float | None:
        """The value as a number (Kubernetes quantities such as ``500m`` included), else None."""
        return quantity(self.value) if self.known else None

    def said(self) -> str:
        """``spec.minReplicaCount = 0 (default)`` / ``... = ${MIN} (unknown)``: how a finding quotes it."""
        if self.placeholder is not None:
            return f"{self.path} = {self.placeholder} (unknown until rendered)"
        shown = self.shown or ("unset" if self.value is None else self.value)
        return f"{self.path} = {shown}" + ("" if self.explicit else " (default)")

    def seconds(self) -> float | None:
        """The value as a duration in seconds (``300``, ``"5m"``, ``"90s"``), else None."""
        return seconds(self.value) if self.known else None


_QUANTITY = re.compile(r"^\s*(?P<n>[+-]?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*(?P<unit>m|k|M|G|Ki|Mi|Gi)?\s*$")
_SCALE = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3}


def quantity(value: Any) -> float | None:
    """A number from a manifest: an int or float, or a string of one, or a Kubernetes quantity
    (``"500m"`` is 0.5); None for anything else (a placeholder, text, a boolean)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and len(value) <= 40 and (match := _QUANTITY.match(value)):
        return float(match["n"]) * _SCALE[match["unit"]]
    return None


def seconds(value: Any) -> float | None:
    """A duration from a manifest: a number of seconds, or Go/Knative's ``"15m"``, ``"90s"``, ``"1h30m"``."""
    number = quantity(value) if not (isinstance(value, str) and value.strip()[-1:] in "smh") else None
    if number is not None:
        return number
    if isinstance(value, str) and (parts := re.fullmatch(r"\s*(?:(\d+)h)?(?:(\d+)m(?!s))?(?:(\d+(?:\.\d+)?)s)?\s*", value)):
        h, m, s = parts.groups()
        if h or m or s:
            return int(h or 0) * 3600 + int(m or 0) * 60 + float(s or 0)
    return None


def metric_name(name: str) -> tuple[str, str | None]:
    """A metric name as a scaler spells it, and its kind where the spelling says: Google Managed
    Prometheus' ``prometheus.googleapis.com|vllm:num_requests_waiting|gauge`` is
    (``vllm:num_requests_waiting``, ``gauge``); any other name is itself, kind unknown."""
    parts = name.split("|")
    if len(parts) == 3 and parts[0].endswith("googleapis.com"):
        return parts[1], parts[2].lower() or None
    return name, None


class SignalSource:
    """Where a signal's number comes from, as the products name it (strings, so records stay data)."""

    RESOURCE = "resource"  # the pods' CPU or memory (HPA Resource/ContainerResource, KEDA cpu/memory, KServe cpu)
    PODS = "pods"  # a per-pod custom metric (HPA Pods, through an adapter)
    OBJECT = "object"  # one object's metric (HPA Object)
    EXTERNAL = "external"  # an external metric (HPA External, through an adapter)
    PROMETHEUS = "prometheus"  # a PromQL query (KEDA's prometheus trigger, KServe's autoScaling.metrics)
    CONCURRENCY = "concurrency"  # requests in flight per replica (Knative, the KEDA HTTP add-on, Ray Serve)
    RPS = "rps"  # requests per second per replica
    ENGINE = "engine"  # an engine metric read from the pods directly (AIBrix metricsSources)
    OTHER = "other"  # a trigger this reader does not judge (cron, kafka...)


@dataclass(frozen=True)
class Signal:
    """One signal the scaler adds replicas on: where it is in the object (``path``), the metric it
    reads (``metric``: ``cpu``, ``vllm:num_requests_waiting``; ``metric_path`` its field) or the
    PromQL ``query`` it runs, the number it aims at (``target``) and how that number is compared
    (``target_type``: ``Utilization``, ``AverageValue`` per replica, or ``Value`` for the whole).

    ``null_as_zero``: for a query whose empty result the product reads as 0 (KEDA's
    ``ignoreNullValues``, default true), that field; None where the question does not arise."""

    path: str
    source: str
    metric: str | None = None
    metric_path: str | None = None
    query: str | None = None
    target: Knob | None = None
    target_type: str | None = None
    null_as_zero: Knob | None = None
    trigger: str | None = None  # the product's own word for it: "prometheus", "cpu", "Resource"
    metric_kind: str | None = None  # "counter" or "gauge" where the name says (Managed Prometheus' ``|counter``)

    @property
    def where(self) -> str:
        """The field that names what is read: the metric's path, else the query's, else the signal's."""
        return self.metric_path or self.path


@dataclass(frozen=True)
class Condition:
    """One status condition (``ScalingActive``, ``AbleToScale``, ``ScalingLimited``, KEDA's ``Ready``
    and ``Fallback``), as the controller wrote it."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class ScalerStatus:
    """What the controller last did: replicas now and wanted, its conditions, and the metrics it read
    (``current_metrics``: metric -> value as written, for the report)."""

    current: int | None = None
    desired: int | None = None
    conditions: tuple[Condition, ...] = ()
    current_metrics: tuple[tuple[str, str], ...] = ()
    last_scale_time: str | None = None
    failing: tuple[str, ...] = ()  # triggers the controller reports as failing (KEDA's status.health)

    def condition(self, kind: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == kind), None)


@dataclass(frozen=True)
class Scaler:
    """One autoscaler, read: which object it is (``kind``, ``namespace``, ``name``, from ``source``),
    which product's rules read it (``product``, a record id), what it scales (``target``), its
    floor and ceiling, its signals, how long load must stay low before replicas go
    (``scale_down_s``), what happens when its signal cannot be read (``fallback``), and its status
    when the object carried one.

    ``serves``: what the scaled pods are, as far as the object tells: ``"gpu"`` (they ask for a GPU
    or read an engine's metrics), ``"router"`` (a router or gateway in front of the engines) or
    None (the object does not say; the rules then take it for the engine they were pointed at)."""

    kind: str
    name: str
    product: str
    source: str
    namespace: str | None = None
    api_version: str = ""
    target: str | None = None
    floor: Knob | None = None
    ceiling: Knob | None = None
    signals: tuple[Signal, ...] = ()
    scale_down_s: Knob | None = None
    scale_up_s: Knob | None = None
    polling_s: Knob | None = None
    fallback: Knob | None = None
    status: ScalerStatus | None = None
    serves: str | None = None
    batch_limit: Knob | None = None  # the engine's own --max-num-seqs where the object's pod template sets it
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``HorizontalPodAutoscaler default/vllm``: how every finding names the object."""
        return f"{self.kind} {self.namespace + '/' if self.namespace else ''}{self.name}"

    @property
    def placeholders(self) -> list[str]:
        """Every field whose value is a placeholder, said as ``path = ${X}``."""
        knobs = [self.floor, self.ceiling, self.scale_down_s, self.scale_up_s, self.polling_s, self.fallback,
                 *(s.target for s in self.signals), *(s.null_as_zero for s in self.signals)]
        return [k.said() for k in knobs if k is not None and k.placeholder is not None]


@dataclass
class ScalingView:
    """The ``scalers`` view: every autoscaler the run read, what it skipped (other kinds, by name) and
    why some objects could not be read (``problems``), where the objects came from, and (live) the
    workload they scale, its pods and the autoscaler resources the cluster does not serve (``absent``);
    from Prometheus history, what each HPA did over the window (``history``: did it try)."""

    scalers: list[Scaler] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    origin: str = ""  # "files", "the Kubernetes API"
    workload: str | None = None
    pods: list[PodState] = field(default_factory=list)
    absent: list[str] = field(default_factory=list)
    history: list[ScalerHistory] = field(default_factory=list)
