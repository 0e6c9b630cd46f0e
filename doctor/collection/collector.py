"""The collector: run the probes the request needs and assemble one redacted ``Bundle``.

Order matters for what it measures: machine and endpoint facts first (they name the model and
the engine process), a /metrics scrape right before the stream probe, background scrapes during
it and a watch for GPU XID errors over it, one scrape right after it, then the trace store's
read-back (its wait is not in the scrapes' deltas), the log and Prometheus history (which read the past and add no load). A probe that fails leaves an
``EvidenceError``; a probe that crashes is recorded as an ``internal`` error too, so ``collect``
always returns a bundle, unless the engine's own /v1/models says it would refuse every request
asked for (longer than its ``max_model_len``): that is the user's setting, a ``UsageError``
raised before the first request. Ctrl-C keeps what was gathered: the stream probe's requests so far, the
scrapes and XID errors so far, and the startup log (a local read that sends nothing); the bundle
is marked ``interrupted``.

The whole run ends by ``--deadline`` (``doctor.probes.deadlines.RunDeadline``): each network step
is given ``min(its own timeout, what is left)`` (recorded in ``RunRecord.steps``), and one with
nothing left is not started but recorded as an ``EvidenceError`` of kind ``deadline``, the
partial bundle still written. What follows the deadline is local: the startup log, the model
config, and the report (docs/probe.md measures that grace). A target that accepted the endpoints
probe's GET and sent not a byte in its whole ``--timeout`` is hung: its own /metrics is not scraped
and the stream probe holds its requests' heads to a short bound (``CollectConfig.silent``), so the
run says so in about 20 s instead of a stall timeout per request and a timeout per scrape.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext, suppress
from dataclasses import replace
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from doctor import __version__
from doctor.collection.run_record import complete_run_record
from doctor.evidence import Bundle, EndpointsEvidence, EvidenceError, ProbePath, StreamEvidence
from doctor.foundation.clock import Clock
from doctor.foundation.errors import UsageError
from doctor.foundation.redact import Redactor, redact_bundle
from doctor.probes.deadlines import RunDeadline
from doctor.probes.kubernetes import parse_target
from doctor.probes.plan import CollectConfig, over_context
from doctor.probes.transport import scheme_line
from doctor.scalers.promql import label_of

if TYPE_CHECKING:
    from doctor.probes import otlp

Progress = Callable[[str], None]

def _guard(bundle: Bundle, source: str, target: str, action: str, fn: Callable[[], Any]) -> Any:
    """Run one probe step; an unexpected exception becomes an ``internal`` evidence error."""
    try:
        return fn()
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - a probe bug must cost its evidence, not the run
        bundle.errors.append(EvidenceError(source, target, action, "internal", _describe(exc), fatal=True))
        return None


def _describe(exc: BaseException) -> str:
    """``Type: message`` of the exceptions that caused ``exc``, inside any exception groups.

    An ``ExceptionGroup`` (anyio's task groups raise them) says only "unhandled errors in a
    TaskGroup"; the user needs the cause it wraps, e.g. ``OverflowError: port must be 0-65535``.
    Duck-typed on ``.exceptions`` so the ``exceptiongroup`` backport on Python 3.10 unwraps too.
    """
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, (list, tuple)) and inner:
        return "; ".join(_describe(e) for e in inner)
    return f"{type(exc).__name__}: {exc}"


def unanswered(endpoints: EndpointsEvidence, config: CollectConfig) -> dict[ProbePath, float]:
    """Each probed path whose target accepted the endpoints probe's GET and sent back not a byte in its
    whole ``--timeout`` (``Endpoint.unanswered_s``): the seconds it was given."""
    roles = {"engine": ProbePath.DIRECT, "gateway": ProbePath.GATEWAY}
    return {roles[ep.role]: ep.unanswered_s for ep in endpoints.endpoints
            if ep.unanswered_s is not None and ep.role in roles and roles[ep.role] in config.targets()}


def wrong_scheme(endpoints: EndpointsEvidence) -> str | None:
    """The line that says a target's URL has the wrong scheme for its port (``Endpoint.scheme_mismatch``)."""
    flags = {"engine": "--engine", "gateway": "--gateway"}
    for ep in endpoints.endpoints:
        if ep.scheme_mismatch is not None:
            return f"{flags.get(ep.role, ep.role)}: {scheme_line(ep.url, ep.scheme_mismatch)}"
    return None


def answered_trace_ids(stream: StreamEvidence) -> set[str]:
    """The trace ids of the probe's requests that the engine answered (a first byte): the traces whose
    spans the receiver waits for and the trace store is asked for."""
    return {r.trace_id for r in stream.requests if r.trace_id and r.t_first_byte is not None}


def _receiver(bundle: Bundle, listen: str, say: Progress) -> otlp.Receiver | None:
    """The OTLP receiver started on ``listen`` and announced, or None and an evidence error when it
    cannot listen there (the port taken): the probe runs on without the engine's spans."""
    from doctor.probes import otlp

    receiver = otlp.Receiver(listen)
    try:
        bound = receiver.start()
    except OSError as exc:
        bundle.errors.append(EvidenceError("traces", listen, "listen", "unavailable",
                                           f"the OTLP receiver cannot listen on {listen}: {exc.strerror or exc}", fatal=True))
        return None
    say(f"OTLP receiver on http://{bound}{otlp.PATH}: start vLLM with --otlp-traces-endpoint http://{bound}{otlp.PATH}")
    return receiver


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _redacting(progress: Progress, secrets: list[str]) -> Progress:
    """Progress lines name URLs and paths the user gave, which may carry credentials."""
    redactor = Redactor(secrets)
    return lambda message: progress(redactor.text(message))


def collect(config: CollectConfig, progress: Progress = lambda _msg: None) -> Bundle:
    """Run the probes and return the redacted bundle (partial, with ``interrupted``, on Ctrl-C)."""
    from doctor.probes import (
        endpoints,
        gpu,
        gpu_xid,
        host,
        ingress,
        logfile,
        metrics,
        model_config,
        otlp,
        prometheus,
        router,
        scalers,
        stream,
        tracestore,
    )

    say = _redacting(progress, config.secrets())
    clock = Clock()
    run = RunDeadline(config.deadline_s)
    bundle = Bundle(tool_version=__version__, created_at=_now_iso())
    bundle.run.tool_version = __version__
    bundle.run.command = config.command
    bundle.run.started_at = bundle.created_at
    bundle.run.engine_url = config.engine
    bundle.run.gateway_url = config.gateway
    bundle.run.log_source = config.log
    bundle.run.deadline_s = config.deadline_s
    for key, value in config.run_fields.items():
        if key == "labels":
            bundle.run.labels.update(value)
        else:
            setattr(bundle.run, key, value)

    def keep(result: tuple[Any, list[EvidenceError]] | None) -> Any:
        if result is None:
            return None
        evidence, errors = result
        bundle.errors.extend(errors)
        return evidence

    def give(step: str, own_s: float) -> float:
        """What ``step`` may take: min(``own_s``, what is left of the run), recorded in the run record."""
        given = run.grant(own_s)
        bundle.run.steps[step] = max(0.0, given)
        return given

    def granted(step: str, own_s: float, source: str, target: str, action: str) -> float | None:
        """``give``; None, and an evidence error saying so, when the run's time ran out before ``step``."""
        given = give(step, own_s)
        if given > 0:
            return given
        bundle.errors.append(EvidenceError(source, target, action, "deadline", run.spent(action), fatal=True))
        return None

    timeout = config.http.timeout_s
    log_started = False

    def read_log(log: str) -> None:
        nonlocal log_started
        log_started = True
        say(f"startup log {log}")
        bundle.log = keep(_guard(bundle, "log", log, "read", lambda: logfile.read_log(log)))

    def read_traces(url: str) -> None:
        """Ask the trace store for the spans of the probe's requests (when the receiver ran too: after
        its wait, into its evidence, for the spans it lacks)."""
        stream_evidence = bundle.stream
        assert stream_evidence is not None
        into = receiver.result() if receiver is not None else None  # stopped: nothing else writes it now
        # every trace, also those the receiver holds spans of: the gateway may export there and the
        # engine to the store (the read-back keeps a span once, by its trace and span id)
        ids = answered_trace_ids(stream_evidence)
        if not ids or granted("trace store", tracestore.WAIT_S, "traces", url, "read back spans") is None:
            return
        say(f"reading the spans of {len(ids)} request(s) back from the trace store {url} (up to {tracestore.WAIT_S:g} s)")
        traces = keep(_guard(bundle, "traces", url, "read back spans", lambda: tracestore.read_back(
            url, ids, tracestore.probe_window(stream_evidence), headers=config.traces_headers, verify=config.http.verify,
            timeout_s=timeout, run=run, into=into)))
        if into is None:
            bundle.traces = traces

    scraper = None
    watch = None
    xids = None
    receiver = None
    try:
        if config.host:
            say("host facts (psutil)")
            bundle.host = keep(_guard(bundle, "host", "localhost", "psutil", lambda: host.collect_host(config.engine)))
        if config.gpu:
            say("GPU facts (NVML)")
            bundle.gpu = keep(_guard(bundle, "gpu", "nvml", "nvmlInit", gpu.collect_gpu))
        targets = ",".join(config.targets().values())
        if config.targets() and granted("endpoints", timeout, "endpoints", targets,
                                        "GET /version /v1/models /health") is not None:
            say("engine and gateway endpoints")
            bundle.endpoints = keep(
                _guard(bundle, "endpoints", targets, "GET /version /v1/models /health",
                       lambda: endpoints.collect_endpoints(config.targets(), config.http, run=run,
                                                           ttft_budget_s=config.budgets.ttft_s)),
            )
        if config.gateway and granted("ingress", timeout, "ingress", config.gateway, "list ingresses") is not None:
            gateway = config.gateway
            bundle.ingress = keep(_guard(bundle, "ingress", gateway, "list ingresses",
                                         lambda: ingress.collect_ingress(gateway)))
        if config.kubernetes and granted("scaling", scalers.BUDGET_S, "scaling", config.kubernetes, "read autoscalers") is not None:
            service, budget_s = config.kubernetes, bundle.run.steps["scaling"]
            say(f"autoscalers of {service}'s workload (Kubernetes API)")
            bundle.scaling = keep(_guard(bundle, "scaling", service, "read autoscalers",
                                         lambda: scalers.collect_scalers(service, budget_s)))
        if config.model is None and bundle.endpoints is not None:
            # the probes after this one ask for the model /v1/models listed first: a copy of the
            # plan names it, and the bundle records it (its stream shape, its run record)
            config = replace(config, model=next((m.id for e in bundle.endpoints.endpoints for m in e.models), None))
        if bundle.endpoints is not None and (why := over_context(config, [m for e in bundle.endpoints.endpoints for m in e.models])):
            raise UsageError(why)  # before the first request: each would only be refused
        if bundle.endpoints is not None and (wrong := wrong_scheme(bundle.endpoints)):
            raise UsageError(wrong)  # at its first failure: every later step would wait a timeout to fail the same
        if bundle.endpoints is not None and (silent := unanswered(bundle.endpoints, config)):
            config = replace(config, silent=silent)  # the stream probe holds their heads to a short bound
        metrics_url = config.resolved_metrics_url() if config.metrics else None
        if metrics_url and config.metrics_url is None and ProbePath.DIRECT in config.silent:
            # the engine's own /metrics, on a server that answered GET /version nothing: it would only
            # cost another --timeout before and after the probe, and each background scrape
            bundle.errors.append(EvidenceError(
                "metrics", metrics_url, "scrape", "timeout",
                f"not scraped: {config.engine} accepted GET /version and sent not a byte in "
                f"{config.silent[ProbePath.DIRECT]:g} s (hung); /metrics there would wait as long"))
            metrics_url = None
        if metrics_url:
            scraper = metrics.Scraper(
                metrics_url, clock, interval_s=config.scrape_interval_s,
                headers=config.http.request_headers(), verify=config.http.verify, timeout_s=timeout, run=run,
            )
            say(f"/metrics before the probe ({metrics_url})")
            give("metrics before", timeout)  # a scrape with no time left records it itself
            _guard(bundle, "metrics", metrics_url, "scrape before", lambda: scraper.scrape("before"))
        if config.router:
            say(f"router {config.router}: its worker list, its /metrics and each replica's")
            give("router before", timeout)
            router_url, router_log = config.router, config.router_log
            log_lines = keep(_guard(bundle, "router", router_log, "read", lambda: router.read_router_log(router_log))) if router_log else []
            watch = router.RouterWatch(
                router_url, clock, metrics_url=config.router_metrics_url, engines=[e for e in (config.engine, *config.fleet) if e],
                args=config.router_args, log_lines=log_lines or [], headers=config.http.request_headers(),
                verify=config.http.verify, timeout_s=timeout, interval_s=config.scrape_interval_s, run=run)
            _guard(bundle, "router", router_url, "read before", watch.start)
        stream_given = granted("stream", config.deadline_s, "stream", targets, "stream") if config.targets() else None
        if stream_given is not None:
            count = (f"{config.requests} request(s) per path" if config.requests is not None else
                     f"requests until every path is clearly within or over budget (at most {config.duration_s:g} s)"
                     if config.adaptive else f"requests for {config.duration_s:g} s")
            if config.rate:
                count += f", Poisson arrivals at {config.rate:g}/s"
            say(f"streaming probe: {count}, {'at most ' if config.rate else ''}concurrency {config.concurrency}")
            # the endpoints probe already asked /v1/models: a second ask would only cost a silent
            # target's timeout again (it runs unless it crashed)
            discover = bundle.endpoints is None
            if config.otlp_listen:
                receiver = _receiver(bundle, config.otlp_listen, say)
            if bundle.gpu is not None and bundle.gpu.available:
                say("watching the GPUs for XID errors (NVML events)")
                xids = gpu_xid.XidWatcher(bundle.gpu, clock)
                _guard(bundle, "gpu", "nvml", "watch XID events", xids.start)
            with scraper.during() if scraper is not None else nullcontext(), watch.during() if watch is not None else nullcontext():
                try:
                    bundle.stream = keep(_guard(
                        bundle, "stream", targets, "stream",
                        lambda: stream.run_stream_probe(config, clock, say, discover_model=discover,
                                                        scrapes=scraper.so_far if scraper is not None else None,
                                                        deadline_s=stream_given)))
                except stream.StreamInterrupted as interrupt:
                    bundle.stream = keep(interrupt.result)
                    raise
            if xids is not None:
                _guard(bundle, "gpu", "nvml", "read XID events", xids.stop)
            if receiver is not None and bundle.stream is not None:
                waiting = receiver
                ids = answered_trace_ids(bundle.stream)
                say(f"waiting up to {otlp.WAIT_S:g} s for the spans of {len(ids)} request(s)")
                _guard(bundle, "traces", config.otlp_listen or "", "wait for spans",
                       lambda: waiting.wait_for(ids, give("traces", otlp.WAIT_S)))
        if scraper is not None:
            say("/metrics after the probe")
            give("metrics after", timeout)
            _guard(bundle, "metrics", metrics_url or "", "scrape after", lambda: scraper.scrape("after"))
        if watch is not None:
            give("router after", timeout)
            _guard(bundle, "router", config.router or "", "scrape after", lambda: watch.scrape("after"))
        if config.traces and bundle.stream is not None:
            # after the "after" scrapes: its wait would put other users' traffic into their deltas
            read_traces(config.traces)
        if config.log:
            read_log(config.log)
        if config.model_dir:
            model_dir = config.model_dir
            say(f"model config {model_dir}")
            bundle.model_config = keep(_guard(bundle, "model_config", model_dir, "read",
                                              lambda: model_config.read_model_config(model_dir)))
        if config.prometheus and granted("prometheus", timeout, "prometheus", config.prometheus, "query") is not None:
            prometheus_url = config.prometheus
            # its HPAs' history: the k8s:// target's namespace, else the one --selector names
            namespace = parse_target(config.kubernetes).namespace if config.kubernetes else label_of(config.selector, "namespace")
            say(f"Prometheus history ({prometheus_url}, last {config.since_s:.0f} s)")
            bundle.prometheus = keep(
                _guard(bundle, "prometheus", prometheus_url, "query",
                       lambda: prometheus.query_history(
                           prometheus_url, since_s=config.since_s, selector=config.selector,
                           headers=config.http.request_headers(), verify=config.http.verify,
                           timeout_s=timeout, run=run, namespace=namespace)),
            )
    except KeyboardInterrupt:
        bundle.interrupted = True
        say("interrupted: writing what was gathered")
        if config.log and not log_started:
            # the startup log explains the engine and is a local read that adds no load: still
            # worth the moment it takes; a second Ctrl-C skips it
            with suppress(KeyboardInterrupt):
                read_log(config.log)
    finally:
        if xids is not None:
            bundle.errors.extend(_guard(bundle, "gpu", "nvml", "record XID events", xids.result) or [])
        if scraper is not None:
            bundle.metrics = keep(_guard(bundle, "metrics", scraper.url, "collect scrapes", scraper.result))
        if receiver is not None:
            bundle.traces = _guard(bundle, "traces", config.otlp_listen or "", "receive spans", receiver.result)
        if watch is not None:
            bundle.router = keep(_guard(bundle, "router", config.router or "", "collect scrapes", watch.result))
    bundle.run.ended_at = _now_iso()
    _guard(bundle, "run", "bundle", "complete run record", lambda: complete_run_record(bundle, config))
    return redact_bundle(bundle, config.secrets())
