"""Build small, exact evidence bundles for check and classifier tests.

Fixture bundles under ``fixtures/checks/`` are written with these helpers so each case is
reviewable: a stream whose gaps are known, scrapes whose deltas are known, log lines as vLLM
prints them. Raw kinds only: the derived views are computed by the real derivations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from doctor.evidence import (
    Bundle,
    LogEvidence,
    LogLine,
    MetricsEvidence,
    ProbeShape,
    ReadRecord,
    RequestTrace,
    Scrape,
    Span,
    StreamEvidence,
    TokenEvent,
    TraceEvidence,
)
from doctor.probes.logfile import read_log

SSE_EVENT_BYTES = 180  # about one vLLM chat chunk
#: The real artifacts (provenance in fixtures/PROVENANCE.md).
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

#: vLLM V1's own bucket bounds (vllm/v1/metrics/loggers.py), in seconds: TTFT / queue / e2e, inter-token.
TTFT_BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def real_log(name: str, folder: str = "logs") -> LogEvidence:
    """A real log of ``fixtures/FOLDER`` (vLLM's in ``logs``, other engines' in ``engines``) as the
    probe reads it, its source named relative to the repository so a fixture built from it is the
    same in every checkout."""
    evidence, errors = read_log(str(FIXTURES / folder / name))
    assert evidence is not None and not errors, errors
    evidence.source = f"fixtures/{folder}/{name}"
    return evidence


def histogram(values: Iterable[float], bounds: tuple[float, ...]) -> dict[str, object]:
    """A histogram value for ``exposition`` holding exactly these observations, in these buckets."""
    vals = list(values)
    return {"sum": round(sum(vals), 6), "count": len(vals),
            "buckets": {le: sum(1 for v in vals if v <= le) for le in bounds}}


def request(
    path: str,
    index: int,
    *,
    ttft: float,
    gaps: Iterable[float],
    start: float = 0.0,
    warmup: bool = False,
    burst_bytes: int | None = None,
    headers_delay: float = 0.01,
    headers: Mapping[str, str] | None = None,
    outcome: str = "ok",
) -> RequestTrace:
    """A request whose tokens arrive ``ttft`` after ``start`` then after each gap.

    With ``burst_bytes`` the reads are grouped the way a buffering proxy delivers them: the
    tokens are released together whenever ``burst_bytes`` of events have accumulated (and
    the response headers arrive with the first burst).
    """
    times = [start + ttft]
    for gap in gaps:
        times.append(times[-1] + gap)
    req = RequestTrace(index=index, path=path, warmup=warmup, t_scheduled=start, t_sent=start,
                       t_connected=start, connection_reused=index > 0, outcome=outcome, status=200,
                       http_version="HTTP/1.1",
                       headers=dict(headers or {"content-type": "text/event-stream"}))
    if outcome != "ok":
        req.status = 500 if outcome == "http-status" else None
        req.error = f"synthetic {outcome}"
        return req
    if burst_bytes is None:
        arrivals = times
        req.reads = [ReadRecord(t=t, nbytes=SSE_EVENT_BYTES, events=1) for t in times]
    else:
        per_burst = max(1, burst_bytes // SSE_EVENT_BYTES)
        arrivals, req.reads = [], []
        for i in range(0, len(times), per_burst):
            group = times[i : i + per_burst]
            release = group[-1]
            arrivals += [release] * len(group)
            req.reads.append(ReadRecord(t=release, nbytes=SSE_EVENT_BYTES * len(group), events=len(group)))
    req.tokens = [TokenEvent(t=t) for t in arrivals]
    req.t_headers = min(start + headers_delay, arrivals[0]) if burst_bytes is None else arrivals[0]
    req.t_first_byte = req.t_first_event = req.t_first_token = arrivals[0]
    req.t_last_token = arrivals[-1]
    req.t_end = arrivals[-1] + 0.001
    req.completion_tokens = len(arrivals)
    req.finish_reason = "length"
    return req


def stream(requests: list[RequestTrace], *, route: str = "chat", concurrency: int = 1,
           paths: Mapping[str, str] | None = None) -> StreamEvidence:
    names = dict.fromkeys(r.path for r in requests)
    urls = dict(paths or {n: f"http://127.0.0.1:{8000 if n == 'direct' else 8080}" for n in names})
    n_req = sum(1 for r in requests if not r.warmup) // max(len(names), 1)
    shape = ProbeShape(route=route, concurrency=concurrency, requests=n_req, warmup=0, paths=urls,
                       prompt_tokens=256, max_tokens=64)
    end = max((r.t_end or r.t_scheduled) for r in requests) if requests else 0.0
    return StreamEvidence(shape=shape, t0_wall=1_700_000_000.0, duration_s=end, requests=requests)


def exposition(values: Mapping[str, object], engine: str = "0", model: str = "m") -> str:
    """Prometheus text for vLLM V1 families.

    ``values`` maps a family name to a number (gauge or counter, by the ``_total`` suffix),
    to ``{"sum": s, "count": c}`` for a histogram (a single +Inf bucket; ``"buckets": {le:
    cumulative count}`` adds finite buckets), or to
    ``{label_value: number}`` for ``vllm:request_success_total`` by ``finished_reason``.
    """
    labels = f'engine="{engine}",model_name="{model}"'
    lines: list[str] = []
    for name, value in values.items():
        if isinstance(value, Mapping) and "count" in value:
            lines += [f"# HELP {name} h", f"# TYPE {name} histogram"]
            lines += [f'{name}_bucket{{{labels},le="{le}"}} {n}' for le, n in dict(value.get("buckets", {})).items()]
            lines += [f'{name}_bucket{{{labels},le="+Inf"}} {value["count"]}',
                      f"{name}_count{{{labels}}} {value['count']}",
                      f"{name}_sum{{{labels}}} {value['sum']}"]
        elif isinstance(value, Mapping):
            base = name.removesuffix("_total")
            lines += [f"# HELP {base} c", f"# TYPE {base} counter"]
            lines += [f'{name}{{{labels},finished_reason="{k}"}} {v}' for k, v in value.items()]
        elif name.endswith("_total"):
            base = name.removesuffix("_total")
            lines += [f"# HELP {base} c", f"# TYPE {base} counter", f"{name}{{{labels}}} {value}"]
        else:
            lines += [f"# HELP {name} g", f"# TYPE {name} gauge", f"{name}{{{labels}}} {value}"]
    return "\n".join(lines) + "\n"


def metrics(*scrapes: tuple[str, float, Mapping[str, object]], url: str = "http://127.0.0.1:8000/metrics") -> MetricsEvidence:
    """``metrics(("before", -0.1, {...}), ("during", 1.0, {...}), ("after", 5.0, {...}))``."""
    return MetricsEvidence(
        url=url,
        interval_s=1.0,
        scrapes=[Scrape(phase=p, t=t, wall=1_700_000_000.0 + t, status=200,
                        content_type="text/plain; version=0.0.4", text=exposition(v)) for p, t, v in scrapes],
    )


def log(lines: Iterable[str], source: str = "vllm.log") -> LogEvidence:
    matched = [LogLine(no=i, text=t) for i, t in enumerate(lines, start=1)]
    return LogEvidence(source=source, lines_total=len(matched), matched=matched)


def bundle(**kinds: object) -> Bundle:
    b = Bundle(tool_version="test", created_at="2026-01-01T00:00:00+00:00")
    for key, value in kinds.items():
        setattr(b, key, value)
    return b


def traced(stream_evidence: StreamEvidence, queues: Mapping[int, float], *, front: float = 0.002, to_engine: float = 0.001,
           others: Iterable[tuple[float, float]] = (), held: Mapping[int, float] | None = None,
           gateway: str | None = None, prompts: Iterable[tuple[float, float, int]] = ()) -> TraceEvidence:
    """vLLM's ``llm_request`` spans for every request of ``stream_evidence`` (given trace ids here), as
    vLLM 0.32 sets them: the span starts ``to_engine`` after the client's send, its TTFT is the client's
    less ``to_engine``, ``queues[index]`` of it queued (0 when not given) after a ``front`` of tokenizing,
    the rest prefill. ``others``: (queue, prefill) of other users' requests, in traces the probe did not send.
    ``held[index]``: seconds more before the engine's arrival (a gateway holding the request); ``gateway``:
    the service of a gateway span in each trace, entered half of ``to_engine`` after the send, ending with the stream.
    ``prompts``: (start, prefill, prompt tokens) of other users' requests computed from ``start`` seconds on the
    run's clock, for ``prefill`` seconds (no queue): the prompts a stream's stall may sit behind."""
    spans = []
    t0 = stream_evidence.t0_wall
    for req in stream_evidence.requests:
        req.trace_id, req.span_id = f"{req.index + 1:032x}", f"{req.index + 1:016x}"
        assert req.t_sent is not None and req.t_first_token is not None and req.t_last_token is not None
        arrival = to_engine + (held or {}).get(req.index, 0.0)
        ttft = req.t_first_token - req.t_sent - arrival
        queue = queues.get(req.index, 0.0)
        spans.append(Span(trace_id=req.trace_id, span_id=f"{req.index + 1:015x}e", parent_span_id=req.span_id,
                          name="llm_request", kind="server", service="vllm",
                          start_ns=round((t0 + req.t_sent + arrival) * 1e9), end_ns=round((t0 + req.t_last_token) * 1e9),
                          attributes={"gen_ai.latency.time_in_queue": queue, "gen_ai.latency.time_to_first_token": ttft,
                                      "gen_ai.latency.time_in_model_prefill": ttft - queue - front,
                                      "gen_ai.latency.time_in_model_decode": req.t_last_token - req.t_first_token,
                                      "gen_ai.request.id": f"chatcmpl-{req.index}", "gen_ai.usage.prompt_tokens": 256}))
        if gateway is not None:
            spans.append(Span(trace_id=req.trace_id, span_id=f"{req.index + 1:015x}a", parent_span_id=req.span_id,
                              name="POST /v1/chat/completions", kind="server", service=gateway,
                              start_ns=round((t0 + req.t_sent + to_engine / 2) * 1e9),
                              end_ns=round((t0 + req.t_last_token) * 1e9)))
    for k, (queue, prefill) in enumerate(others):
        spans.append(Span(trace_id=f"{k + 1:x}".rjust(32, "f"), span_id=f"{k + 1:016x}", name="llm_request", kind="server",
                          service="vllm", start_ns=round(t0 * 1e9), end_ns=round((t0 + queue + prefill + 1) * 1e9),
                          attributes={"gen_ai.latency.time_in_queue": queue, "gen_ai.latency.time_in_model_prefill": prefill,
                                      "gen_ai.latency.time_to_first_token": queue + prefill + front}))
    for k, (start, prefill, tokens) in enumerate(prompts):
        spans.append(Span(trace_id=f"{k + 1:x}".rjust(32, "e"), span_id=f"{k + 1:016x}", name="llm_request", kind="server",
                          service="vllm", start_ns=round((t0 + start) * 1e9), end_ns=round((t0 + start + prefill + 1) * 1e9),
                          attributes={"gen_ai.latency.time_in_queue": 0.0, "gen_ai.latency.time_in_model_prefill": prefill,
                                      "gen_ai.latency.time_to_first_token": prefill, "gen_ai.request.id": f"cmpl-user-{k}",
                                      "gen_ai.usage.prompt_tokens": tokens}))
    return TraceEvidence(source="otlp", listen="127.0.0.1:4318", cap=20_000, spans=spans, payloads=1)
