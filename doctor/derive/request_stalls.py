"""Each probe request's longest wait between two tokens, and the other requests' prefills it sat behind.

vLLM computes a new request's prompt in the same engine steps as the running requests' next tokens
(up to ``max_num_batched_tokens`` per step): a step that carries a long prompt holds every stream's
next token until it ends. The server's histograms can only say that some steps were long; the
engine's span of every request in the window says when each prompt was computed, from its
scheduling to its first token (``gen_ai.latency.time_in_model_prefill`` ending at
``time_to_first_token`` after the span's start). Put on the client's clock by the join's
alignment, the prefills that overlap a probe request's longest stall are what it waited behind,
request by request: the other users' long prompts, named by their request ids and prompt sizes.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from doctor.derive.engine_spans import PREFILL, PROMPT_TOKENS, REQUEST_ID, TTFT, count, seconds
from doctor.evidence import RequestTrace, Span

#: A stall sat behind others' prefills when those prefills (their union) cover at least this share of it.
STALL_COVERED = 0.5
#: The overlapping prefills kept per stall, the largest prompt first.
MAX_BEHIND = 3


@dataclass
class Behind:
    """Another request's prefill that ran during a probe request's stall, from that request's own span."""

    request_id: str | None  # the engine's id of the other request (``cmpl-...``)
    probe: bool  # one of the probe's own requests, not another user's
    prompt_tokens: int | None
    prefill: float  # seconds its prompt took
    overlap: float  # seconds of the stall it covered


@dataclass
class Stall:
    """A probe request's longest gap between two tokens, on the client's clock from its send."""

    after_token: int  # the token events before the gap (1: between the first and the second)
    start: float  # seconds after the client's send
    seconds: float
    usual: float  # the median of the request's gaps between tokens: what a stall is long against
    covered: float  # the share of the gap the other requests' prefills covered (their union)
    behind: list[Behind] = field(default_factory=list)  # the largest prompts among them, at most ``MAX_BEHIND``
    prefills: int = 0  # how many other requests' prefills overlapped it


def prefill_window(span: Span, offset: float, t0_wall: float) -> tuple[float, float] | None:
    """When ``span``'s request was in prefill, in seconds on the client's run clock; None when its span
    does not say (no prefill or TTFT attribute: a gateway's span, or a request without a first token)."""
    ttft, prefill = seconds(span.attributes, TTFT), seconds(span.attributes, PREFILL)
    if ttft is None or prefill is None or prefill <= 0 or ttft < prefill:
        return None
    end = span.start_ns / 1e9 + ttft + offset - t0_wall
    return end - prefill, end


def longest_stall(req: RequestTrace, sent: float, windows: list[tuple[Span, tuple[float, float]]],
                  own: Span, probe_traces: set[str]) -> Stall | None:
    """``req``'s longest gap between two token events, with the prefills of ``windows`` (every other
    request's span and its prefill on the client's clock) that overlap it; None under two tokens.
    Only the engine's own service counts (``own.service``): a prompt on another service or replica
    that exports to the same receiver held none of this engine's steps."""
    times = [t.t for t in req.tokens]
    if len(times) < 2:
        return None
    i = max(range(1, len(times)), key=lambda k: times[k] - times[k - 1])
    a, b = times[i - 1], times[i]
    usual = statistics.median(times[k] - times[k - 1] for k in range(1, len(times)))
    if b <= a:
        return Stall(after_token=i, start=a - sent, seconds=0.0, usual=usual, covered=0.0)
    hits = [(span, max(a, lo), min(b, hi), hi - lo) for span, (lo, hi) in windows
            if span is not own and span.service == own.service and min(b, hi) > max(a, lo)]
    covered = _union([(lo, hi) for _, lo, hi, _ in hits]) / (b - a)
    # prompts scheduled in the same steps share one prefill window: the largest is what held them
    hits.sort(key=lambda h: (-(count(h[0].attributes, PROMPT_TOKENS) or 0), -(h[2] - h[1])))
    behind = [Behind(request_id=_text(span.attributes.get(REQUEST_ID)), probe=span.trace_id in probe_traces,
                     prompt_tokens=count(span.attributes, PROMPT_TOKENS),
                     prefill=prefill, overlap=hi - lo)
              for span, lo, hi, prefill in hits[:MAX_BEHIND]]
    return Stall(after_token=i, start=a - sent, seconds=b - a, usual=usual, covered=min(1.0, covered), behind=behind,
                 prefills=len(hits))


def _union(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``intervals``."""
    total, reach = 0.0, float("-inf")
    for lo, hi in sorted(intervals):
        if hi > reach:
            total += hi - max(lo, reach)
            reach = hi
    return total


def _text(value: object) -> str | None:
    return str(value) if value is not None else None
