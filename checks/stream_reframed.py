"""The gateway changes the stream's framing.

What it detects:
The direct path streams OpenAI SSE (`data: {json}` chunks ending with `[DONE]`, as vLLM does)
and the gateway path answers the same request in another framing: SSE whose data is plain
text, SSE with named events, NDJSON, or raw text chunks (the vLLM playbook's FastAPI edge
forwards `delta.content` as raw text).

Why it matters:
Not a latency problem: the framing the probe detected per path is how it still timed both. But
any client that expects OpenAI SSE (the `openai` SDKs, LangChain, an OpenAI-compatible UI) breaks
on the gateway's stream, and a framing without per-token events leaves token counts to be
estimated from text length.

Evidence:
Stream probe on both paths: the framing the reader detected (or `--framing` forced) on each
path's first successful request, and whether the gateway's token counts are estimated.

Remediation:
Relay the engine's OpenAI SSE unchanged on routes meant for OpenAI-compatible clients (setting
`gateway_framing`), or document the edge's own framing for its clients; in a FastAPI edge,
yield the upstream's `data:` lines (with `media_type="text/event-stream"`) instead of
`delta.content`.

Example:
LD306 stream-reframed: the direct path streams OpenAI SSE (JSON chunks, [DONE]), the gateway raw
text chunks (no per-token framing); gateway token counts are estimated -> relay OpenAI SSE
unchanged, or document the edge's framing.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import PathPair, measured_pair, rerun, who_answered
from doctor.derive.gateway import GatewayView
from doctor.derive.stream_stats import StreamStats
from doctor.evidence.stream import FRAMINGS
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

OPENAI_SSE = "openai-sse"


@dataclass(frozen=True)
class Found:
    """Both paths' framing (the direct one OpenAI SSE, the gateway's another) and who answered."""

    pair: PathPair
    direct: str
    framing: str
    gateway: str


@check(code="LD306", name="stream-reframed", symptom=SymptomClass.PROXY_ONLY, cause=Cause.REFRAMING)
def stream_reframed(stream_stats: StreamStats, gateway: GatewayView | None = None) -> Result:
    pair = measured_pair(stream_stats)  # raises NotApplicable unless both paths were measured
    d, g = pair.direct, pair.gateway
    if d.framing is None or g.framing is None:
        return NotApplicable("the stream framing was not recorded (a bundle from before framing detection)")
    if d.framing != OPENAI_SSE:
        return NotApplicable(_direct_not_sse(d.framing))
    if g.framing == OPENAI_SSE:
        return Pass("both paths stream OpenAI SSE")
    found = Found(pair, d.framing, g.framing, who_answered(gateway)[1])
    return Fire(
        felt=False,  # a compatibility note: the framing changes, not the timing
        title="The gateway re-frames the token stream",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.INFO,
        evidence=_evidence(found),
    )


def _framing(framing: str) -> str:
    return FRAMINGS.get(framing, framing)


def _direct_not_sse(framing: str) -> str:
    return f"the direct path does not stream OpenAI SSE ({_framing(framing)})"


def _summary(found: Found) -> str:
    return (f"the direct path streams {FRAMINGS[OPENAI_SSE]}, the gateway {_framing(found.framing)}"
            + ("; gateway token counts are estimated from text length" if found.pair.gateway.tokens_estimated else ""))


def _remediation(found: Found) -> Remediation:
    name = found.gateway
    return Remediation(
        setting="gateway_framing",
        suggested="relay the engine's OpenAI SSE unchanged (or document the edge's own framing)",
        current=found.framing,
        where=f"{name}: the streaming route's response",
        why=(f"{name} answers in {_framing(found.framing)} where vLLM sends OpenAI SSE: clients that "
             "expect OpenAI SSE (the openai SDKs, OpenAI-compatible UIs) cannot read it. In a FastAPI edge, "
             "yield the upstream's `data:` lines with media_type text/event-stream instead of delta.content."),
        verify=rerun("the gateway path's framing reported as OpenAI SSE"),
    )


def _evidence(found: Found) -> list[EvidenceValue]:
    d, g = found.pair.direct, found.pair.gateway
    return [
        EvidenceValue("direct framing", found.direct, "", f"stream: direct, n={d.n_ok}"),
        EvidenceValue("gateway framing", found.framing, "", f"stream: gateway, n={g.n_ok}"),
        EvidenceValue("gateway tokens estimated", g.tokens_estimated, "", "stream: gateway reader"),
    ]
