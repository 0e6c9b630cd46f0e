"""The gateway sends requests to the engine again: retries multiply the load.

What it detects:
The engine took in more requests than the probe sent: a gateway that retries on a timeout (nginx
`proxy_next_upstream ... timeout non_idempotent` with a short `proxy_read_timeout`, HAProxy
`retry-on` / `option redispatch`, an Envoy retry policy, LiteLLM `num_retries`) sends the same
prompt again, and the try it gave up on is abandoned, aborted or left generating.

Why it matters:
Each retry prefills the whole prompt again, and retries come exactly when the engine is slow, so
they add load where there is none to spare: a long prompt retried on every timeout keeps an
engine saturated with work no client waits for.

Evidence:
Metrics window: the requests the engine took in (its finished-request counter by every reason,
plus the rise of its running and waiting gauges: those still in it after the probe are work no
client waits for), its aborted requests and its prompt-token counter, from the scrapes taken
right before and after the probe (not Prometheus history); stream probe: the requests sent on
each path over the same window (warm-up included), the prompt tokens of one request (its usage
trailer), the time each failed gateway request took divided by the tries (the gateway's timeout
per try), and retry headers (`x-envoy-attempt-count`,
LiteLLM's `x-litellm-attempted-retries` / `x-litellm-attempted-fallbacks`). The count is exact
when the engine was idle as the probe began (no other client's request in flight); otherwise it
is a share, and other clients' requests may be among the extra ones. The extra requests are load:
users felt them when a gateway request failed after its tries, or when the gateway's TTFT p50 is
above the direct path's beyond noise (stream_stats); otherwise the finding is a risk.

Remediation:
Stop retrying requests the engine already took, in the gateway's terms: nginx
`proxy_next_upstream error` (no `timeout`, no `non_idempotent`) with `proxy_next_upstream_tries
1`; HAProxy `retry-on conn-failure` without `option redispatch`; Envoy's route `retry_policy`;
LiteLLM `num_retries: 0`; and a read timeout above the longest first byte.

Options:
min_extra: extra requests (taken in less sent) at which it fires
min_extra_share: extra requests / requests sent at which it fires

Example:
LD310 gateway-retries: the engine took in 15 requests while the probe sent 10 (5 direct, 5 through
the gateway): 2.0 engine requests per gateway request, 6 aborted; exact: the engine was idle when
the probe began -> proxy_next_upstream: error (without timeout and non_idempotent).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_intake, gateway_identity, header, measured_pair, probe_sent, rerun, retry_remediation
from doctor.derive.gateway import GatewayView
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.evidence import Bundle, ProbePath, RequestTrace
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: Response headers that count a request's tries: Envoy's attempts, LiteLLM's retries and fallbacks (tries - 1).
ATTEMPT_HEADERS = (("x-envoy-attempt-count", 0), ("x-litellm-attempted-retries", 1), ("x-litellm-attempted-fallbacks", 1))


def tries_told(requests: list[RequestTrace]) -> int:
    """The most tries a gateway's own headers report for one request (1 when none says)."""
    most = 1
    for r in requests:
        for name, offset in ATTEMPT_HEADERS:
            value = (header(r.headers, name) or "").strip()
            if value.isdigit():
                most = max(most, int(value) + offset)
    return most


def time_per_try(requests: list[RequestTrace], tries: float) -> float | None:
    """Median time from send to the gateway's failed answer, per try: the gateway's timeout."""
    spans = [end - r.t_sent for r in requests
             if not r.ok and r.t_sent is not None and (end := r.t_headers or r.t_failed or r.t_end) is not None]
    return statistics.median(spans) / tries if spans and tries >= 1 else None


@dataclass(frozen=True)
class Found:
    """The requests the engine took in (aborted, still in flight at the end, exact when it was idle
    at the start, their prompt tokens) against those the probe sent each way, the engine requests
    per gateway request (``tries``), the most tries the gateway's headers report, the median probe
    prompt, and the time per try of failed gateway requests."""

    direct: int
    through: int
    taken_in: float
    aborted: float
    in_flight_rise: float
    exact: bool
    prompt_tokens: float | None
    prompt: float | None
    tries: float
    told: int
    per_try: float | None

    @property
    def sent(self) -> int:
        return self.direct + self.through


@check(code="LD310", name="gateway-retries", symptom=SymptomClass.PROXY_ONLY, cause=Cause.GATEWAY_RETRIES)
def gateway_retries(
    bundle: Bundle, metrics_window: MetricsWindow, gateway: GatewayView | None = None,
    stream_stats: StreamStats | None = None,
    *,
    min_extra: float = 1.0,
    min_extra_share: float = 0.2,
) -> Result:
    intake = engine_intake(metrics_window)
    if intake is None:
        return NotApplicable("no count of the requests the engine took in: no /metrics scrapes around the probe "
                             "(Prometheus history does not bracket it), or no vllm:request_success_total")
    sent = probe_sent(bundle.stream.requests if bundle.stream else [])
    direct, through = len(sent[ProbePath.DIRECT]), len(sent[ProbePath.GATEWAY])
    if not through:
        return NotApplicable("no request sent through the gateway (--gateway)")
    total = direct + through
    extra = intake.requests - total
    if extra < min_extra or extra < min_extra_share * total:
        return Pass(_no_retries(intake.requests, total))
    tries = (intake.requests - direct) / through
    prompts = [r.prompt_tokens for rs in sent.values() for r in rs if r.prompt_tokens]
    found = Found(
        direct=direct, through=through, taken_in=intake.requests, aborted=intake.aborted,
        in_flight_rise=intake.in_flight_rise, exact=intake.idle_at_start, prompt_tokens=intake.prompt_tokens,
        prompt=statistics.median(prompts) if intake.prompt_tokens and prompts else None, tries=tries,
        told=tries_told(sent[ProbePath.GATEWAY]), per_try=time_per_try(sent[ProbePath.GATEWAY], tries),
    )
    exact = found.exact
    corroborated = found.told > 1 or intake.aborted >= extra / 2
    # the extra requests are load on the engine; users feel them when the tries failed their request or
    # made it wait (the gateway's TTFT above the direct path's), else it is a risk
    felt = found.per_try is not None or _gateway_adds_ttft(stream_stats)
    return Fire(
        title="The gateway sends requests to the engine again",
        summary=_summary(found),
        remediation=_remediation(found, gateway),
        severity=(Severity.CRITICAL if exact and tries >= 1.5 else Severity.WARNING) if exact or corroborated
        else Severity.INFO,
        felt=felt,
        evidence=_evidence(found) + gateway_identity(gateway),
    )


def _no_retries(taken_in: float, sent: int) -> str:
    return f"the engine took in {taken_in:.0f} requests, the probe sent {sent}: no retries"


def _summary(found: Found) -> str:
    summary = (f"the engine took in {found.taken_in:.0f} requests while the probe sent {found.sent} ({found.direct} "
               f"direct, {found.through} through the gateway): {found.tries:.1f} engine requests per gateway request, "
               f"{found.aborted:.0f} aborted; "
               + ("exact: the engine was idle when the probe began" if found.exact
                  else "a share: other clients' requests may be among them"))
    if found.prompt is not None and found.prompt_tokens:
        summary += f"; it prefilled about {found.prompt_tokens / found.prompt:.0f} prompts of {found.prompt:.0f} tokens"
    if found.in_flight_rise > 0:
        summary += f"; {found.in_flight_rise:.0f} still in the engine as the probe ended: work no client waits for"
    if found.told > 1:
        summary += f"; the gateway's headers count up to {found.told} tries"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue("requests the engine took in", found.taken_in, "requests",
                      "metrics: vllm:request_success_total delta (every reason) + rise of running and waiting"),
        EvidenceValue("requests the probe sent", found.sent, "requests",
                      f"stream: {found.direct} direct, {found.through} gateway, warm-up included"),
        EvidenceValue("engine requests per gateway request", round(found.tries, 3), "",
                      "metrics and stream: (taken in - direct sent) / gateway sent"),
        EvidenceValue("finished with abort", found.aborted, "requests",
                      "metrics: vllm:request_success_total{finished_reason=abort} delta"),
        EvidenceValue("engine idle when the probe began", found.exact, "", "metrics: running + waiting at the first scrape"),
    ]
    if found.prompt is not None and found.prompt_tokens:
        evidence.append(EvidenceValue("prompts prefilled", round(found.prompt_tokens / found.prompt, 1), "prompts",
                                      f"metrics: prompt-token counter delta / {found.prompt:.0f} tokens per probe "
                                      "prompt (usage)"))
    if found.in_flight_rise > 0:
        evidence.append(EvidenceValue("still running or waiting after the probe", found.in_flight_rise, "requests",
                                      "metrics: running + waiting at the last scrape less at the first"))
    if found.told > 1:
        evidence.append(EvidenceValue("tries the gateway's headers report", found.told, "tries",
                                      "stream: gateway response headers"))
    if found.per_try is not None:
        evidence.append(EvidenceValue("time per try of failed gateway requests", round(found.per_try, 3), "s",
                                      "stream: send to the gateway's answer, median / tries"))
    return evidence


def _remediation(found: Found, gateway: GatewayView | None) -> Remediation:
    return retry_remediation(gateway, fmt_seconds(found.per_try) if found.per_try is not None else "an unknown time",
                             rerun(f"the engine takes in as many requests as the probe sends ({found.sent})"))


#: The gateway's TTFT p50 above the direct one's, beyond noise, at which the tries count as felt.
FELT_TTFT_S = 0.02


def _gateway_adds_ttft(stream_stats: StreamStats | None) -> bool:
    """Whether the gateway's first token came later than the engine's beyond noise (``PathPair``)."""
    if stream_stats is None:
        return False
    try:
        return measured_pair(stream_stats).gateway_adds_ttft(FELT_TTFT_S)
    except NotApplicable:
        return False
