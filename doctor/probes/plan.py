"""What a ``collect`` / ``diagnose`` / ``probe`` run was asked to do: the collector's plan.

A leaf beside the probes (it needs only their HTTP options and the evidence's ``ProbeShape``), so
the collector, the stream probe and the run record all read one definition without importing
each other. Its field defaults are the defaults of the flags: ``doctor.settings`` reads them, and
the help text quotes them. The route and load shape default to ``ProbeShape``'s, which is what a
bundle that recorded no shape loads with, so the two cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from doctor.evidence.endpoints import ModelInfo
from doctor.evidence.stream import ProbePath, ProbeShape
from doctor.model import Budgets
from doctor.probes.gateway_route import GatewayRoute
from doctor.probes.http import HttpOptions, credential_header, join_url
from doctor.probes.lengths import Lengths

#: The most measured requests per path an adaptive probe sends, whatever its duration.
MAX_ADAPTIVE_REQUESTS = 256
#: The largest sizes a run is asked for; ``doctor.settings`` refuses more before anything is
#: sent. Requests per path: every one keeps a trace in memory and in the bundle, which must read
#: back under ``doctor.bundle``'s size limit (100,000 traces are a few tens of MB).
MAX_REQUESTS = 100_000
#: Streams in flight per path: each holds a connection (and a file descriptor) of this process.
MAX_STREAMS = 4096
#: Poisson arrivals per second per path: more than any one client process can send.
MAX_RATE = 100_000.0
#: Seconds any duration, deadline or interval may be: a week.
MAX_SECONDS = 7 * 86400.0


def over_context(config: CollectConfig, models: list[ModelInfo]) -> str | None:
    """Why the engine would refuse every request of ``config``: the longest prompt plus its answer
    above the ``max_model_len`` that /v1/models announced for the probed model; None when it fits,
    when the body is the user's own (``--payload``) or when no length was announced.

    Refused before the first request: each would only come back as HTTP 400, after the whole
    oversized prompt had been built, sent and recorded.
    """
    if config.payload is not None:
        return None
    # the model asked for, or the one the probe will take when none is named (the first listed); a
    # named model the list lacks (a gateway's own route) is none of the others: their limits say nothing
    model = next((m for m in models if m.id == config.model), None) if config.model else (models[0] if models else None)
    if model is None or model.max_model_len is None:
        return None
    lengths = config.lengths
    if lengths is None:
        longest = config.prompt_tokens + config.max_tokens
    elif lengths.shapes:
        longest = max(p + m for p, m in lengths.shapes)
    else:
        longest = (lengths.prompt_high or lengths.prompt_tokens) + (lengths.max_tokens_high or lengths.max_tokens)
    if longest <= model.max_model_len:
        return None
    return (f"the longest request asked for (--prompt-tokens plus --max-tokens: {longest} tokens) is more than "
            f"the {model.max_model_len} tokens (max_model_len) that {model.id} accepts: every request would be refused")


@dataclass(frozen=True)
class CollectConfig:
    """Everything ``collect`` / ``diagnose`` / ``probe`` were asked to do (flags over config file).

    Frozen, as the ``RunSettings`` it is part of (``doctor.settings``): a derived plan (a sweep's
    level, a round's target, the model the collector found) is a ``dataclasses.replace``.
    """

    command: str = "collect"
    engine: str | None = None  # vLLM directly
    # Every replica of a fleet run (several --engine, or a k8s:// Service), ``engine`` the first;
    # empty for one engine. ``doctor.runs.watch_round`` diagnoses each as its own target.
    fleet: list[str] = field(default_factory=list)
    # The ``k8s://namespace/service:port`` the engines were found behind: its workload's autoscalers
    # are read (``doctor.probes.scalers``); None for an engine given as a URL.
    kubernetes: str | None = None
    gateway: str | None = None  # what the application calls
    route: str = ProbeShape.route
    payload: dict[str, Any] | None = None  # the application's own request body (--payload FILE)
    payload_source: str | None = None
    # The application's own route and body on the gateway path (--gateway-route, --gateway-payload)
    gateway_route: GatewayRoute | None = None
    gateway_payload_source: str | None = None
    framing: str | None = None  # --framing: force one (doctor.evidence.stream.FRAMINGS); None detects
    text_field: str | None = None  # --text-field: the dotted path of the text in NDJSON objects
    gateway_kind: str | None = None  # --gateway-kind: names the edge in remediations
    model: str | None = None
    prompt_tokens: int = 256
    max_tokens: int = 64
    concurrency: int = ProbeShape.concurrency
    # per path; None: adaptive, until every path is clearly within or over budget
    # (doctor.probes.sampling) or ``duration_s`` runs out, at most ``MAX_ADAPTIVE_REQUESTS``
    requests: int | None = None
    duration_s: float = 30.0  # the measured phase's time budget when ``requests`` is None
    warmup: int = ProbeShape.warmup  # per path, excluded from statistics
    rate: float | None = None  # Poisson arrivals per second instead of closed loop
    stall_timeout_s: float = 30.0
    deadline_s: float = 300.0
    http: HttpOptions = field(default_factory=HttpOptions)
    log: str | None = None
    model_dir: str | None = None  # the served model's directory (or config.json), for sizing
    metrics_url: str | None = None  # default: engine URL + /metrics
    metrics: bool = True
    scrape_interval_s: float = 1.0
    # The wedge watchdog (doctor.probes.watchdog): seconds requests may wait without a first token
    # while every engine counter in /metrics stands still before the probe stops; 0 turns it off.
    # Under half the stall timeout, so a wedged engine is named before the first request times out.
    wedge_bound_s: float = 15.0
    # Paths whose target accepted the endpoints probe's GET and sent no byte back in its whole --timeout
    # (``Endpoint.unanswered_s``), set by the collector: a hung server. Their response heads are held to
    # ``doctor.probes.deadlines.HUNG_FLOOR_S`` (``silent_head_bound``) instead of the stall timeout.
    silent: dict[ProbePath, float] = field(default_factory=dict)
    prometheus: str | None = None
    # The router between the gateway and the replicas (--router; the gateway path when no --gateway
    # is given): its /metrics (--router-metrics, default its URL + /metrics), its flags as deployed
    # (--router-args) and its startup log (--router-log), read by doctor.probes.router.
    router: str | None = None
    router_metrics_url: str | None = None
    router_args: tuple[str, ...] = ()
    router_log: str | None = None
    since_s: float = 900.0
    selector: str = ""
    gpu: bool = True
    host: bool = True
    run_fields: dict[str, Any] = field(default_factory=dict)  # provider, region, client_location, labels
    budgets: Budgets = field(default_factory=Budgets)  # what the adaptive probe samples against
    # ``llm-doctor load`` / ``sweep``: the MLPerf scenario (single | server | offline), per-request
    # lengths drawn from a range or a file, the one path driven (the gateway when both are given:
    # the engine is then read for /metrics only), no adaptive stop (the scenario's duration or
    # count decides), and how many requests may be planned without --requests.
    scenario: str | None = None
    lengths: Lengths | None = None
    only_path: ProbePath | None = None
    adaptive: bool = True
    request_cap: int = MAX_ADAPTIVE_REQUESTS
    # --client-workers: processes that read the streams (``doctor.probes.shard``); 1 is one process,
    # None chooses: for a load run by the streams in flight and the CPUs, for a diagnosis one process
    client_workers: int | None = None
    # Every probe request carries a W3C ``traceparent`` (``doctor.probes.trace_context``) unless
    # --no-trace-context: a gateway that rejects unknown headers would otherwise refuse them all.
    trace_context: bool = True
    # --otlp-listen: "HOST:PORT" of the OTLP/HTTP receiver run during the probe
    # (``doctor.probes.otlp``), where the engine's and the gateway's spans arrive; None: no receiver.
    otlp_listen: str | None = None
    # --traces: the trace store (Jaeger's or Tempo's query API) the probe's spans are read back from
    # after the probe (``doctor.probes.tracestore``), and --traces-header, the headers it is asked
    # with (its credentials, a tenant); None: no read-back.
    traces: str | None = None
    traces_headers: dict[str, str] = field(default_factory=dict)

    def secrets(self) -> list[str]:
        """Every literal value the redactor removes: the targets' credentials and the trace store's."""
        return self.http.secrets() + [v for k, v in self.traces_headers.items() if credential_header(k)]

    def targets(self) -> dict[ProbePath, str]:
        """The direct path's URL (the engine) and the gateway's, for those given: the paths the probes compare."""
        return {k: v for k, v in ((ProbePath.DIRECT, self.engine), (ProbePath.GATEWAY, self.gateway)) if v}

    def probed(self) -> dict[ProbePath, str]:
        """The paths the stream probe sends to: ``targets()``, or only ``only_path`` of them."""
        targets = self.targets()
        return {self.only_path: targets[self.only_path]} if self.only_path in targets else targets

    def request_lengths(self) -> Lengths:
        """Each request's lengths: ``lengths`` when given, else the fixed ``prompt_tokens`` / ``max_tokens``."""
        return self.lengths or Lengths(self.prompt_tokens, self.max_tokens)

    def resolved_metrics_url(self) -> str | None:
        """The /metrics URL to scrape: ``--metrics-url``, else the engine's own, else None (no engine)."""
        if self.metrics_url:
            return self.metrics_url
        return join_url(self.engine, "/metrics") if self.engine else None
