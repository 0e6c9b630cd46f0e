"""LiteLLM spends a large share of the first-token time itself.

What it detects:
The gateway is a LiteLLM proxy, and its own `x-litellm-overhead-duration-ms` response header
(sent on every response: LiteLLM's total time minus the upstream call's) says that LiteLLM's
work, not the engine's, is a large share of the TTFT users see through it. The header splits
LiteLLM's share from the upstream's even without a direct path.

Why it matters:
Every request pays that time before its first token, and no engine setting recovers it. LiteLLM
names the usual causes itself: DEBUG logging (the first cause with large payloads), logging
callbacks building large payloads (`x-litellm-callback-duration-ms`), large base64 bodies.

Evidence:
Stream probe, gateway path: `x-litellm-overhead-duration-ms` and `x-litellm-callback-duration-ms`
of every measured request (the `gateway` view), against the gateway's TTFT p50; the direct TTFT
p50 beside it when the engine was probed too.

Remediation:
Take the work off LiteLLM's request path: with callbacks taking most of it, fewer or lighter
logging callbacks (setting `callbacks`); otherwise logging at INFO, not DEBUG or
`--detailed_debug` (setting `LITELLM_LOG`). `LITELLM_DETAILED_TIMING=true` adds per-phase
timing headers to find the phase, and `/health/backlog` shows waits before LiteLLM's handler,
which its own header cannot see.

Options:
overhead_share: LiteLLM's overhead p50 / the gateway's TTFT p50 that fires
min_overhead_s: an overhead below this is too small to matter for interactive use
warning_share: the share that makes it a warning, else info
callback_share: callbacks taking at least this share of the overhead are named as the cause

Example:
LD308 litellm-overhead: LiteLLM reports 210 ms of its own per request (x-litellm-overhead-duration-ms
p50, n=4), 61 % of the gateway's TTFT p50 344 ms; the upstream's share 134 ms -> LITELLM_LOG=INFO.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import gateway_identity, rerun
from doctor.derive.gateway import LITELLM_CALLBACK, LITELLM_OVERHEAD, GatewayView
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.evidence import ProbePath
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """LiteLLM's own time per request (p50, max, over ``n`` responses) against the gateway's TTFT p50
    (``share``), the direct path's TTFT, the time in callbacks, the LiteLLM hop's name, and whether
    the callbacks take most of it (the lever then)."""

    own_p50: float
    own_max: float | None
    own_n: int
    gateway: PathStats
    direct: PathStats | None
    share: float
    callbacks: float | None
    callbacks_n: int
    hop: str | None
    in_callbacks: bool


@check(code="LD308", name="litellm-overhead", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_OVERHEAD)
def litellm_overhead(
    gateway: GatewayView,
    stream_stats: StreamStats,
    *,
    overhead_share: float = 0.25,
    min_overhead_s: float = 0.05,
    warning_share: float = 0.5,
    callback_share: float = 0.5,
) -> Result:
    own = gateway.litellm_overhead
    g = stream_stats.path(ProbePath.GATEWAY)
    if own.n == 0 or own.p50 is None:
        return NotApplicable(_not_litellm())
    if g is None or not g.ttft.p50:
        return NotApplicable("no gateway request got a first token to weigh LiteLLM's overhead against")
    share = own.p50 / g.ttft.p50
    callbacks = gateway.litellm_callback.p50
    hop = gateway.hop("litellm")
    found = Found(own.p50, own.max, own.n, g, stream_stats.path(ProbePath.DIRECT), share, callbacks,
                  gateway.litellm_callback.n, hop.name if hop else None,
                  callbacks is not None and callbacks >= callback_share * own.p50)
    if own.p50 < min_overhead_s or share < overhead_share:
        return Pass(_small(found))
    return Fire(
        title="LiteLLM spends a large share of the first-token time itself",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING if share >= warning_share else Severity.INFO,
        evidence=_evidence(found) + gateway_identity(gateway),
    )


def _not_litellm() -> str:
    return f"no {LITELLM_OVERHEAD} header on the gateway's responses: not a LiteLLM proxy"


def _small(found: Found) -> str:
    return (f"LiteLLM reports {fmt_seconds(found.own_p50)} of its own per request (n={found.own_n}), "
            f"{found.share:.0%} of the gateway's TTFT p50 {fmt_seconds(found.gateway.ttft.p50)}")


def _summary(found: Found) -> str:
    ttft, d = found.gateway.ttft.p50 or 0.0, found.direct
    summary = (f"LiteLLM reports {fmt_seconds(found.own_p50)} of its own per request ({LITELLM_OVERHEAD} p50, "
               f"n={found.own_n}), {found.share:.0%} of the gateway's TTFT p50 {fmt_seconds(ttft)} "
               f"(n={found.gateway.ttft.n}); the upstream's share {fmt_seconds(max(ttft - found.own_p50, 0.0))}")
    if d is not None and d.ttft.p50:
        summary += f" (direct TTFT p50 {fmt_seconds(d.ttft.p50)}, n={d.ttft.n})"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    d = found.direct
    return [
        EvidenceValue("LiteLLM overhead p50", found.own_p50, "s", f"stream: gateway {LITELLM_OVERHEAD}, n={found.own_n}"),
        EvidenceValue("LiteLLM overhead max", found.own_max, "s", f"stream: gateway {LITELLM_OVERHEAD}, n={found.own_n}"),
        EvidenceValue("LiteLLM callbacks p50", found.callbacks, "s",
                      f"stream: gateway {LITELLM_CALLBACK}, n={found.callbacks_n}"),
        EvidenceValue("gateway TTFT p50", found.gateway.ttft.p50, "s", f"stream: gateway, n={found.gateway.ttft.n}"),
        EvidenceValue("LiteLLM share of gateway TTFT p50", round(found.share, 4), "", "overhead p50 / TTFT p50"),
        EvidenceValue("direct TTFT p50", d.ttft.p50 if d else None, "s", f"stream: direct, n={d.ttft.n if d else 0}"),
    ]


def _remediation(found: Found) -> Remediation:
    where = f"{found.hop or 'LiteLLM proxy'}: its config.yaml and environment"
    tools = ("Set LITELLM_DETAILED_TIMING=true for per-phase timing headers, and poll /health/backlog: a wait in "
             "uvicorn's event loop before LiteLLM's handler runs is in the TTFT but not in this header.")
    if found.in_callbacks and found.callbacks is not None:
        return Remediation(
            setting="callbacks", suggested="fewer or lighter logging callbacks on the request path",
            current=f"{fmt_seconds(found.callbacks)} per request in callbacks", where=where,
            why=(f"LiteLLM spends {fmt_seconds(found.callbacks)} of its {fmt_seconds(found.own_p50)} building callback "
                 f"and logging payloads ({LITELLM_CALLBACK}); above ~100 ms its docs call the payloads too large for "
                 "efficient logging. Drop or sample `success_callback`/`callbacks` entries, or log smaller "
                 "payloads. " + tools),
            verify=rerun(f"{LITELLM_CALLBACK} and {LITELLM_OVERHEAD} well below the gateway's TTFT"))
    return Remediation(
        setting="LITELLM_LOG", suggested="INFO (no DEBUG, no --detailed_debug)", where=where,
        why=(f"LiteLLM's own work is {fmt_seconds(found.own_p50)} of the {fmt_seconds(found.gateway.ttft.p50 or 0.0)} "
             "before the first token. Its latency guide names DEBUG logging as the first cause with large payloads, "
             "then large base64 bodies and callbacks. " + tools),
        verify=rerun(f"{LITELLM_OVERHEAD} well below the gateway's TTFT"))
