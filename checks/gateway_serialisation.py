"""The gateway handles concurrent streams one after another.

What it detects:
Under concurrent requests the gateway's TTFT spreads out in steps while the direct path's does
not: the first request of a wave is fast, the next waits about one whole answer, the next two,
and so on. The edge serialises streams, typically an async handler calling a blocking HTTP
client (`requests`, a sync `httpx.Client`) or a single synchronous worker.

Why it matters:
Every user after the first waits for the answers ahead of them to finish, so TTFT grows with
concurrency although the engine batches the requests without trouble. Scaling the engine does
not help; the edge is the queue.

Evidence:
Stream probe on both paths at concurrency >= 2. The wait per path: TTFT p90 minus TTFT min, in
units of one answer (the direct end-to-end time p50); a one-at-a-time edge makes the c-th
concurrent request wait c-1 answers, while the engine's own queueing stays well under one. Also
the gateway's TTFT p90 against the direct one, the steps in the gateway's sorted TTFTs larger
than half an answer (the staircase), and every request's TTFT in send order. The gateway view:
a gateway that queues on a connection cap of its own (HAProxy `maxconn`, Envoy's circuit
breakers) makes the same staircase, which gateway-connection-cap (LD309) names instead; so does an
unidentified one that let two or more streams run at once (the stream probe's first and last
tokens), where a serialising edge runs one.

Remediation:
Make the edge stream asynchronously (setting `gateway_streaming`): an async HTTP client
(`httpx.AsyncClient`, `aiohttp`) whose response is relayed chunk by chunk, or enough workers
for the offered concurrency, so the edge never waits on one upstream stream to serve another.

Options:
wait_answers: the gateway's p90 request waited at least this many answers more than its fastest
spread_factor: gateway wait / direct wait
ttft_factor: gateway TTFT p90 / direct p90
step_share: a staircase step is a TTFT jump of at least this share of an answer
critical_steps: staircase steps that make the finding critical

Example:
LD303 gateway-serialisation: at concurrency 4 the gateway's p90 request waited 2.1 answers
(TTFT p90 1.27 s, min 174 ms, n=8) vs 0.4 direct (answer 524 ms); TTFT p90 6.1x direct; 2 steps
of ~380 ms -> async streaming client in the edge.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import QUEUEING_CAPS, PathPair, gateway_wait, measured_pair, rerun, stream_cap, who_answered
from doctor.derive.gateway import GatewayView
from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.evidence import StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


def staircase_steps(ps: PathStats, step_s: float) -> list[float]:
    """Jumps between consecutive sorted TTFTs of measured requests that are at least ``step_s``."""
    ttfts = sorted(r.ttft for r in ps.requests if not r.warmup and r.outcome == "ok" and r.ttft is not None)
    return [b - a for a, b in itertools.pairwise(ttfts) if b - a >= step_s]


def send_order(ps: PathStats) -> list[float]:
    """TTFT of each measured request in the order the probe sent them (rounded to the ms)."""
    ok = [r for r in sorted(ps.requests, key=lambda r: r.index) if not r.warmup and r.outcome == "ok"]
    return [round(ttft, 3) for r in ok if (ttft := r.ttft) is not None]


@dataclass(frozen=True)
class Found:
    """The gateway's staircase: both paths' waits in answers (one answer: ``answer_s``), its TTFT p90
    against the direct one, the jumps of at least ``step_s`` between its sorted TTFTs, and who answered."""

    concurrency: int
    pair: PathPair
    answer_s: float
    direct_wait: float
    gateway_wait: float
    ttft_ratio: float
    step_s: float
    steps: tuple[float, ...]
    family: str | None
    gateway: str


@check(
    code="LD303", name="gateway-serialisation", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_SERIALISATION
)
def gateway_serialisation(
    stream_stats: StreamStats, gateway: GatewayView | None = None, stream: StreamEvidence | None = None,
    *,
    wait_answers: float = 1.0,
    spread_factor: float = 3.0,
    ttft_factor: float = 2.0,
    step_share: float = 0.5,
    critical_steps: int = 2,
) -> Result:
    if stream_stats.concurrency < 2:
        return NotApplicable("serialisation shows only under concurrent requests (probe concurrency was 1)")
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    waits = gateway_wait(pair)
    if waits is None:
        return NotApplicable("fewer than two successful gateway requests, or no direct answer time")
    if not waits.queued(wait_answers, spread_factor, ttft_factor):
        return Pass(_no_serialisation(waits.gateway, waits.direct, waits.ttft_ratio))
    family, name = who_answered(gateway)
    if family in QUEUEING_CAPS:
        return Pass(_queues_on_a_cap(waits.gateway, name))
    cap = stream_cap(stream.requests, stream_stats.concurrency) if family is None and stream is not None else None
    if cap is not None:
        return Pass(_let_several_run(waits.gateway, cap.gateway, cap.direct))
    step_s = step_share * waits.answer_s
    found = Found(stream_stats.concurrency, pair, waits.answer_s, waits.direct, waits.gateway, waits.ttft_ratio,
                  step_s, tuple(staircase_steps(pair.gateway, step_s)), family, name)
    return Fire(
        title="The gateway serialises concurrent streams",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.CRITICAL if len(found.steps) >= critical_steps else Severity.WARNING,
        evidence=_evidence(found),
    )


def _no_serialisation(gateway_wait: float, direct_wait: float, ttft_ratio: float) -> str:
    return (f"gateway p90 request waited {gateway_wait:.1f} answers vs {direct_wait:.1f} direct, TTFT p90 "
            f"{ttft_ratio:.1f}x direct: no serialisation")


def _queues_on_a_cap(gateway_wait: float, gateway: str) -> str:
    return (f"the gateway's p90 request waited {gateway_wait:.1f} answers, but {gateway} queues on its own "
            "connection cap: see gateway-connection-cap (LD309)")


def _let_several_run(gateway_wait: float, at_once: int, direct: int) -> str:
    return (f"the gateway's p90 request waited {gateway_wait:.1f} answers, but it let {at_once} streams run at "
            f"once (not one at a time) while {direct} ran direct: a connection cap, see "
            "gateway-connection-cap (LD309)")


def _summary(found: Found) -> str:
    d, g, steps = found.pair.direct, found.pair.gateway, found.steps
    summary = (
        f"at concurrency {found.concurrency} the gateway's p90 request waited {found.gateway_wait:.1f} answers (TTFT "
        f"p90 {fmt_seconds(g.ttft.p90 or 0.0)}, min {fmt_seconds(g.ttft.min or 0.0)}, n={g.ttft.n}) vs "
        f"{found.direct_wait:.1f} direct (answer {fmt_seconds(found.answer_s)}, n={d.e2e.n}); TTFT p90 "
        f"{found.ttft_ratio:.1f}x direct"
    )
    if steps:
        summary += f"; {len(steps)} step(s) of ~{fmt_seconds(sum(steps) / len(steps))}"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    d, g = found.pair.direct, found.pair.gateway
    return [
        EvidenceValue("gateway wait (TTFT p90 - min) in answers", round(found.gateway_wait, 3), "answers",
                      f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct wait (TTFT p90 - min) in answers", round(found.direct_wait, 3), "answers",
                      f"stream: direct, n={d.ttft.n}"),
        EvidenceValue("answer time (direct end-to-end p50)", found.answer_s, "s", f"stream: direct, n={d.e2e.n}"),
        EvidenceValue("gateway TTFT p90", g.ttft.p90, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("gateway TTFT min", g.ttft.min, "s", f"stream: gateway, n={g.ttft.n}"),
        EvidenceValue("direct TTFT p90", d.ttft.p90, "s", f"stream: direct, n={d.ttft.n}"),
        EvidenceValue("staircase steps", len(found.steps), "", f"stream: gateway TTFT jumps >= {fmt_seconds(found.step_s)}"),
        EvidenceValue("probe concurrency", found.concurrency, "", "stream: probe shape"),
        EvidenceValue("gateway TTFT per request", send_order(g), "s", "stream: gateway, in send order"),
        EvidenceValue("direct TTFT per request", send_order(d), "s", "stream: direct, in send order"),
    ]


def _remediation(found: Found) -> Remediation:
    c, name = found.concurrency, found.gateway
    why = (
        "TTFT through the gateway grows with each concurrent request while the engine answers "
        "them together on the direct path: the edge serves one upstream stream at a time (a "
        "blocking HTTP client inside an async handler, or too few sync workers). "
    )
    if found.family == "uvicorn":
        suggested = "the async client in the edge, or the blocking call in a thread pool"
        why += (
            f"In {name}: call vLLM with the async client (openai.AsyncOpenAI, httpx.AsyncClient) and `async for` "
            "over its stream, or keep the sync client but iterate it in a thread pool (a plain `def` generator "
            "given to StreamingResponse, or starlette.concurrency.iterate_in_threadpool), never inside an "
            f"`async def`; and run enough workers (uvicorn --workers) for {c} concurrent streams."
        )
    else:
        suggested = "async streaming client in the edge"
        why += (
            "Relay the upstream response chunk by chunk with an async client (openai.AsyncOpenAI, httpx.AsyncClient, aiohttp); in a "
            "Starlette/FastAPI edge, iterate a sync client's stream in a thread pool (iterate_in_threadpool), never "
            f"inside an `async def`; or run at least {c} workers."
        )
    return Remediation(
        setting="gateway_streaming",
        suggested=suggested,
        where=f"{name}: the edge application that forwards requests to vLLM",
        why=why,
        verify=rerun(f"the gateway's wait close to the direct one ({found.direct_wait:.1f} answers) at concurrency {c}"),
    )
