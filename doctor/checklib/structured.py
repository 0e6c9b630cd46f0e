"""The probe's constrained requests and their unconstrained twins, as the structured-output checks read them.

With a ``--payload`` that constrains decoding (``ProbeShape.constraints``: a JSON schema, tools, a
guided grammar), the probe sends first its unconstrained twins (``StreamEvidence.controls``: the
same prompt, free text), then the constrained requests. A schema's first-request compile (LD108)
and the per-token cost of constrained decoding (LD212) are both read against those twins, which
carry the prompt's own cost (prefill, its prefix cache) and nothing of the schema.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import NotApplicable
from doctor.engine_metrics.window import parse_scrape
from doctor.evidence import MetricsEvidence, ProbePath, RequestTrace, StreamEvidence


@dataclass
class ConstrainedRun:
    """The answered constrained requests in send order, and the answered twins (the prefix-warm ones
    when there are several: the first twin also paid the prompt's cold prefix)."""

    constraints: list[str]
    constrained: list[RequestTrace]
    controls: list[RequestTrace]

    @property
    def tools(self) -> bool:
        """Whether the payload carried tools (tool-call streams, whose parser may hold arguments back)."""
        return "tools" in self.constraints


def constrained_run(stream: StreamEvidence) -> ConstrainedRun:
    """The probe's constrained requests and their twins; ``NotApplicable`` when the body was not
    constrained, no twin answered, or fewer than two constrained requests did."""
    shape = stream.shape
    if not shape.constraints:
        raise NotApplicable("the probe's requests did not constrain decoding (no --payload with response_format, "
                            "tools or guided_*)")
    carried = {ProbePath.DIRECT} | ({ProbePath.GATEWAY} if shape.gateway_route is None else set())
    constrained = sorted((r for r in stream.requests if r.path in carried and _answered(r)),
                         key=lambda r: r.t_sent or 0.0)
    controls = [r for r in stream.controls if _answered(r)]
    if not controls:
        raise NotApplicable("no unconstrained twin of the payload answered: nothing to compare the constrained "
                            "requests with")
    if len(constrained) < 2:
        raise NotApplicable(f"{len(constrained)} constrained request(s) answered: a first and its repeats are needed")
    return ConstrainedRun(list(shape.constraints), constrained, controls[1:] or controls)


def request_ttft(trace: RequestTrace) -> float:
    """From the send to the first token, as the client saw it."""
    return (trace.t_first_token or 0.0) - (trace.t_sent or 0.0)


def per_token(trace: RequestTrace) -> float | None:
    """Seconds per generated token after the first event (TPOT); None with fewer than two tokens after it."""
    after = sum(e.tokens for e in trace.tokens[1:])
    if after < 2 or trace.t_first_token is None or trace.t_last_token is None:
        return None
    return (trace.t_last_token - trace.t_first_token) / after


def _answered(trace: RequestTrace) -> bool:
    return trace.ok and trace.t_first_token is not None and trace.t_sent is not None


def generated_within(metrics: MetricsEvidence | None, start: float, end: float) -> float | None:
    """Tokens the engine generated between the first and the last scrape inside ``(start, end)``
    (its generation-token counter, every engine and user summed); None with fewer than two such
    scrapes, or no counter in them."""
    if metrics is None:
        return None
    totals = []
    for scrape in metrics.scrapes:
        if not start < scrape.t < end:
            continue
        parsed, _ = parse_scrape(scrape)
        values = [x.value for x in parsed.samples if x.family == "generation_tokens" and x.part == "value"] if parsed else []
        if values:
            totals.append(sum(values))
    return totals[-1] - totals[0] if len(totals) >= 2 else None
