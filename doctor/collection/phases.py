"""The collector's steps in their order, as data: ``PHASES`` (before, around and after the stream),
``ON_INTERRUPT`` (what a Ctrl-C still takes), ``FINISH`` (the watchers' results, always) and ``RECORD``.

Each probe step is a ``Step`` (``doctor.collection.gathering``: what it reads, how the deadline bounds
it, which evidence it writes) over a small function that calls one probe. The plain functions
among them decide the plan from what the steps before found (the model the endpoints list, a
request the engine would refuse, a hung target). ``doctor.collection.collector`` says why the order
is this one; a new probe is one record in the phase where its measurement belongs.
"""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import replace

from doctor.collection.gathering import Found, Gathering, Phase, Step
from doctor.collection.run_record import complete_run_record
from doctor.evidence import EndpointsEvidence, EvidenceError, ProbePath, StreamEvidence
from doctor.foundation.errors import UsageError
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
from doctor.probes.kubernetes import parse_target
from doctor.probes.plan import CollectConfig, over_context
from doctor.probes.transport import scheme_line
from doctor.scalers.promql import label_of


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


def _timeout(config: CollectConfig) -> float:
    return config.http.timeout_s


def _targets(g: Gathering) -> str | None:
    return ",".join(g.config.targets().values()) or None


# --- before the stream: the machine and the endpoints (they name the model and the engine process)


def _host(g: Gathering, _target: str, _s: float | None) -> Found:
    return host.collect_host(g.config.engine)


def _gpu(_g: Gathering, _target: str, _s: float | None) -> Found:
    return gpu.collect_gpu()


def _endpoints(g: Gathering, _targets: str, _s: float | None) -> Found:
    return endpoints.collect_endpoints(g.config.targets(), g.config.http, run=g.run, ttft_budget_s=g.config.budgets.ttft_s)


def _ingress(_g: Gathering, gateway: str, _s: float | None) -> Found:
    return ingress.collect_ingress(gateway)


def _scaling(_g: Gathering, service: str, budget_s: float | None) -> Found:
    assert budget_s is not None
    return scalers.collect_scalers(service, budget_s)


def _name_the_model(g: Gathering) -> None:
    """The probes after the endpoints ask for the model /v1/models listed first: a copy of the plan
    names it, and the bundle records it (its stream shape, its run record)."""
    if g.config.model is None and g.bundle.endpoints is not None:
        g.config = replace(g.config, model=next((m.id for e in g.bundle.endpoints.endpoints for m in e.models), None))


def _refuse_what_would_fail(g: Gathering) -> None:
    """A request longer than the engine's ``max_model_len`` would only be refused, before the first
    request; a URL of the wrong scheme at its first failure: every later step would wait a timeout
    to fail the same."""
    if g.bundle.endpoints is None:
        return
    if why := over_context(g.config, [m for e in g.bundle.endpoints.endpoints for m in e.models]):
        raise UsageError(why)
    if wrong := wrong_scheme(g.bundle.endpoints):
        raise UsageError(wrong)


def _hold_silent_targets(g: Gathering) -> None:
    """The stream probe holds the response heads of a hung target to a short bound."""
    if g.bundle.endpoints is not None and (silent := unanswered(g.bundle.endpoints, g.config)):
        g.config = replace(g.config, silent=silent)


def _choose_metrics_url(g: Gathering) -> None:
    """The /metrics to scrape; not the engine's own on a server that answered GET /version nothing:
    it would only cost another ``--timeout`` before and after the probe, and each background scrape."""
    config = g.config
    url = config.resolved_metrics_url() if config.metrics else None
    if url and config.metrics_url is None and ProbePath.DIRECT in config.silent:
        g.bundle.errors.append(EvidenceError(
            "metrics", url, "scrape", "timeout",
            f"not scraped: {config.engine} accepted GET /version and sent not a byte in "
            f"{config.silent[ProbePath.DIRECT]:g} s (hung); /metrics there would wait as long"))
        url = None
    g.metrics_url = url


def _scrape_before(g: Gathering, url: str, _s: float | None) -> None:
    """The scraper, and its scrape right before the stream (a scrape with no time left records it itself)."""
    config = g.config
    g.scraper = metrics.Scraper(url, g.clock, interval_s=config.scrape_interval_s, headers=config.http.request_headers(),
                                verify=config.http.verify, timeout_s=config.http.timeout_s, run=g.run)
    g.scraper.scrape("before")


def _router_before(g: Gathering, url: str, _s: float | None) -> None:
    """The router's watch (its log, worker list, /metrics and each replica's), started."""
    config = g.config
    log = config.router_log
    log_lines = g.guarded("router", log, "read", lambda: router.read_router_log(log)) if log else []
    g.watch = router.RouterWatch(
        url, g.clock, metrics_url=config.router_metrics_url, engines=[e for e in (config.engine, *config.fleet) if e],
        args=config.router_args, log_lines=log_lines or [], headers=config.http.request_headers(),
        verify=config.http.verify, timeout_s=config.http.timeout_s, interval_s=config.scrape_interval_s, run=g.run)
    g.watch.start()


BEFORE = Phase("before the stream", (
    Step("host", "host", "psutil", lambda g: "localhost" if g.config.host else None, _host, writes="host",
         line=lambda _g, _t: "host facts (psutil)"),
    Step("gpu", "gpu", "nvmlInit", lambda g: "nvml" if g.config.gpu else None, _gpu, writes="gpu",
         line=lambda _g, _t: "GPU facts (NVML)"),
    Step("endpoints", "endpoints", "GET /version /v1/models /health", _targets, _endpoints, writes="endpoints",
         line=lambda _g, _t: "engine and gateway endpoints", grant_s=_timeout),
    Step("ingress", "ingress", "list ingresses", lambda g: g.config.gateway, _ingress, writes="ingress", grant_s=_timeout),
    Step("scaling", "scaling", "read autoscalers", lambda g: g.config.kubernetes, _scaling, writes="scaling",
         line=lambda _g, service: f"autoscalers of {service}'s workload (Kubernetes API)", grant_s=lambda _c: scalers.BUDGET_S),
    _name_the_model,
    _refuse_what_would_fail,
    _hold_silent_targets,
    _choose_metrics_url,
    Step("metrics before", "metrics", "scrape before", lambda g: g.metrics_url, _scrape_before,
         line=lambda _g, url: f"/metrics before the probe ({url})", give_s=_timeout),
    Step("router before", "router", "read before", lambda g: g.config.router, _router_before,
         line=lambda _g, url: f"router {url}: its worker list, its /metrics and each replica's", give_s=_timeout),
))


# --- around the stream: the receiver and the XID watch start, the scrapes run beside it


def _count_line(g: Gathering, _targets: str) -> str:
    config = g.config
    count = (f"{config.requests} request(s) per path" if config.requests is not None else
             f"requests until every path is clearly within or over budget (at most {config.duration_s:g} s)"
             if config.adaptive else f"requests for {config.duration_s:g} s")
    if config.rate:
        count += f", Poisson arrivals at {config.rate:g}/s"
    return f"streaming probe: {count}, {'at most ' if config.rate else ''}concurrency {config.concurrency}"


def _hold_the_stream(g: Gathering, _targets: str, seconds: float | None) -> None:
    g.stream_s = seconds


def _listen(g: Gathering, listen: str, _s: float | None) -> None:
    """The OTLP receiver started on ``listen`` and announced, or an evidence error when it cannot
    listen there (the port taken): the probe runs on without the engine's spans."""
    receiver = otlp.Receiver(listen)
    try:
        bound = receiver.start()
    except OSError as exc:
        g.bundle.errors.append(EvidenceError("traces", listen, "listen", "unavailable",
                                             f"the OTLP receiver cannot listen on {listen}: {exc.strerror or exc}", fatal=True))
        return
    g.receiver = receiver
    g.say(f"OTLP receiver on http://{bound}{otlp.PATH}: start vLLM with --otlp-traces-endpoint http://{bound}{otlp.PATH}")


def _watch_xids(g: Gathering, _target: str, _s: float | None) -> None:
    assert g.bundle.gpu is not None
    g.xids = gpu_xid.XidWatcher(g.bundle.gpu, g.clock)
    g.xids.start()


def _stream(g: Gathering, _targets: str, _s: float | None) -> Found | None:
    """The stream probe, the watchers' background scrapes beside it; a Ctrl-C keeps its requests so far.
    The endpoints probe already asked /v1/models: a second ask would only cost a silent target's
    timeout again (it runs unless it crashed)."""
    scraper, watch = g.scraper, g.watch
    with scraper.during() if scraper is not None else nullcontext(), watch.during() if watch is not None else nullcontext():
        try:
            return stream.run_stream_probe(g.config, g.clock, g.say, discover_model=g.bundle.endpoints is None,
                                           scrapes=scraper.so_far if scraper is not None else None, deadline_s=g.stream_s)
        except stream.StreamInterrupted as interrupt:
            g.bundle.stream = g.keep(interrupt.result)
            raise


def _stop_xids(g: Gathering, _target: str, _s: float | None) -> None:
    assert g.xids is not None
    g.xids.stop()


def _spans_line(g: Gathering, _listen: str) -> str:
    assert g.bundle.stream is not None
    return f"waiting up to {otlp.WAIT_S:g} s for the spans of {len(answered_trace_ids(g.bundle.stream))} request(s)"


def _wait_for_spans(g: Gathering, _listen: str, seconds: float | None) -> None:
    assert g.receiver is not None and g.bundle.stream is not None and seconds is not None
    g.receiver.wait_for(answered_trace_ids(g.bundle.stream), seconds)


AROUND = Phase("around the stream", gate=Step("stream", "stream", "stream", _targets, _hold_the_stream,
                                              line=_count_line, grant_s=lambda c: c.deadline_s), steps=(
    Step("otlp", "traces", "listen", lambda g: g.config.otlp_listen, _listen),
    Step("xid watch", "gpu", "watch XID events", lambda g: "nvml" if g.bundle.gpu is not None and g.bundle.gpu.available else None,
         _watch_xids, line=lambda _g, _t: "watching the GPUs for XID errors (NVML events)"),
    Step("stream probe", "stream", "stream", _targets, _stream, writes="stream"),
    Step("xid stop", "gpu", "read XID events", lambda g: "nvml" if g.xids is not None else None, _stop_xids),
    Step("traces", "traces", "wait for spans",
         lambda g: g.config.otlp_listen or "" if g.receiver is not None and g.bundle.stream is not None else None,
         _wait_for_spans, line=_spans_line, give_s=lambda _c: otlp.WAIT_S),
))


# --- after the stream: one scrape each, then what reads the past and adds no load


def _scrape_after(g: Gathering, _url: str, _s: float | None) -> None:
    assert g.scraper is not None
    g.scraper.scrape("after")


def _router_after(g: Gathering, _url: str, _s: float | None) -> None:
    assert g.watch is not None
    g.watch.scrape("after")


def _stop_listening(g: Gathering, _listen: str, _s: float | None) -> None:
    """The receiver stops before the trace store is read: nothing else writes its evidence then."""
    assert g.receiver is not None
    g.receiver.result()


def _read_back_target(g: Gathering) -> str | None:
    """The trace store, after the "after" scrapes (its wait would put other users' traffic into their
    deltas), when the engine answered a request: asked for every trace, also those the receiver
    holds spans of (the gateway may export there and the engine to the store; a span is kept once)."""
    stream_evidence = g.bundle.stream
    return g.config.traces if stream_evidence is not None and answered_trace_ids(stream_evidence) else None


def _read_back_line(g: Gathering, url: str) -> str:
    assert g.bundle.stream is not None
    ids = answered_trace_ids(g.bundle.stream)
    return f"reading the spans of {len(ids)} request(s) back from the trace store {url} (up to {tracestore.WAIT_S:g} s)"


def _read_back(g: Gathering, url: str, _s: float | None) -> Found:
    """The spans of the probe's requests, into the receiver's evidence when it ran, for the spans it lacks."""
    stream_evidence = g.bundle.stream
    assert stream_evidence is not None
    into = g.receiver.result() if g.receiver is not None else None
    return tracestore.read_back(url, answered_trace_ids(stream_evidence), tracestore.probe_window(stream_evidence),
                                headers=g.config.traces_headers, verify=g.config.http.verify,
                                timeout_s=g.config.http.timeout_s, run=g.run, into=into)


def _read_log(_g: Gathering, log: str, _s: float | None) -> Found:
    return logfile.read_log(log)


def _read_model_config(_g: Gathering, model_dir: str, _s: float | None) -> Found:
    return model_config.read_model_config(model_dir)


def _prometheus_line(g: Gathering, url: str) -> str:
    return f"Prometheus history ({url}, last {g.config.since_s:.0f} s)"


def _query_history(g: Gathering, url: str, _s: float | None) -> Found:
    """The history of the engine's metrics and its HPAs': the ``k8s://`` target's namespace, else the
    one ``--selector`` names."""
    config = g.config
    namespace = parse_target(config.kubernetes).namespace if config.kubernetes else label_of(config.selector, "namespace")
    return prometheus.query_history(url, since_s=config.since_s, selector=config.selector, headers=config.http.request_headers(),
                                    verify=config.http.verify, timeout_s=config.http.timeout_s, run=g.run, namespace=namespace)


#: The startup log: a local read that sends nothing, so Ctrl-C still takes it (``ON_INTERRUPT``).
LOG = Step("log", "log", "read", lambda g: g.config.log, _read_log, writes="log", line=lambda _g, log: f"startup log {log}")

AFTER = Phase("after the stream", (
    Step("metrics after", "metrics", "scrape after", lambda g: g.metrics_url or "" if g.scraper is not None else None,
         _scrape_after, line=lambda _g, _url: "/metrics after the probe", give_s=_timeout),
    Step("router after", "router", "scrape after", lambda g: g.config.router or "" if g.watch is not None else None,
         _router_after, give_s=_timeout),
    Step("stop listening", "traces", "stop listening",
         lambda g: g.config.otlp_listen or "" if g.receiver is not None and g.config.traces and g.bundle.stream is not None else None,
         _stop_listening),
    Step("trace store", "traces", "read back spans", _read_back_target, _read_back, writes="traces",
         line=_read_back_line, grant_s=lambda _c: tracestore.WAIT_S),
    LOG,
    Step("model config", "model_config", "read", lambda g: g.config.model_dir, _read_model_config, writes="model_config",
         line=lambda _g, model_dir: f"model config {model_dir}"),
    Step("prometheus", "prometheus", "query", lambda g: g.config.prometheus, _query_history, writes="prometheus",
         line=_prometheus_line, grant_s=_timeout),
))

PHASES = (BEFORE, AROUND, AFTER)
#: What a Ctrl-C still takes when the run had not reached it (a second Ctrl-C skips it).
ON_INTERRUPT = (LOG,)


# --- always, after a Ctrl-C too: what the watchers gathered


def _xid_result(g: Gathering, _target: str, _s: float | None) -> Found:
    assert g.xids is not None
    return None, g.xids.result()


def _scrapes(g: Gathering, _url: str, _s: float | None) -> Found:
    assert g.scraper is not None
    return g.scraper.result()


def _spans(g: Gathering, _listen: str, _s: float | None) -> Found:
    assert g.receiver is not None
    return g.receiver.result(), []


def _router_scrapes(g: Gathering, _url: str, _s: float | None) -> Found:
    assert g.watch is not None
    return g.watch.result()


FINISH = (
    Step("xid result", "gpu", "record XID events", lambda g: "nvml" if g.xids is not None else None, _xid_result),
    Step("metrics result", "metrics", "collect scrapes", lambda g: g.scraper.url if g.scraper is not None else None,
         _scrapes, writes="metrics"),
    Step("traces result", "traces", "receive spans", lambda g: g.config.otlp_listen or "" if g.receiver is not None else None,
         _spans, writes="traces"),
    Step("router result", "router", "collect scrapes", lambda g: g.config.router or "" if g.watch is not None else None,
         _router_scrapes, writes="router"),
)


def _complete(g: Gathering, _target: str, _s: float | None) -> None:
    complete_run_record(g.bundle, g.config)


#: The run record, completed last from the plan and what the probes learned.
RECORD = Step("run record", "run", "complete run record", lambda _g: "bundle", _complete)
