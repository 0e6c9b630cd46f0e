"""A schema's first request waits for its grammar to compile; the repeats do not.

What it detects:
Schema compile: with a constrained ``--payload`` (a JSON-schema ``response_format``, ``tools``,
``guided_json``), the first constrained request's first token comes much later than the repeats'
and than the same prompt's unconstrained twin, which had already warmed the prompt's prefix.

Why it matters:
A structured-output backend compiles each distinct schema into a grammar before the request's
first decode step, and caches it. The first request per schema after a start (or per new schema,
when applications generate them) pays the compile in its TTFT; xgrammar is usually milliseconds,
but large or deeply nested schemas take seconds, and the request waits while it runs
(vllm#12122: TTFT p50 0.6 -> 4 s). It is told apart from steady constrained decoding (LD212),
where every constrained request is slower per token, and from a cold prefix, which the twin paid.

Evidence:
stream: the constrained requests in send order (warm-up included: the first one is the compile),
and ``controls``, the payload's unconstrained twins the probe sent first (the prefix-warm ones).
Startup log: the structured-output backend in use.

Remediation:
Warm each schema before the replica takes traffic (one request per distinct schema after start),
and keep the backend that compiles and caches fastest, xgrammar (vLLM's
``--structured-outputs-config '{"backend": "xgrammar"}'``); an application that builds a new
schema per request pays the compile every time, so keep schemas few and stable.

Options:
compile_ratio: first constrained TTFT over the larger of the repeats' median and the twin's at which it fires
min_excess_s: seconds the first request must lose beyond that baseline
ttft_target_s: the first-token target (defaults to --ttft-budget): a compile that keeps the first
    request within it is a risk, not felt latency

Example:
first constrained request TTFT 2.41 s, repeats median 0.21 s, unconstrained twin 0.19 s: the
schema's compile cost about 2.2 s once.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import Setting, constrained_run, engine_flag, engine_setting, request_ttft, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.engines.names import VLLM
from doctor.evidence import RequestTrace, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, SymptomClass


@dataclass(frozen=True)
class Found:
    """The first constrained request's TTFT against the repeats' median and the unconstrained twins'
    (``baseline``: the larger), the constraints, and the structured-output backend in use."""

    first: RequestTrace
    first_s: float
    repeat_s: float
    repeats: int
    twin_s: float
    twins: int
    constraints: tuple[str, ...]
    backend: Setting | None

    @property
    def baseline(self) -> float:
        return max(self.repeat_s, self.twin_s)


@check(code="LD108", name="schema-compile", symptom=SymptomClass.PRE_FIRST_TOKEN, cause=Cause.STRUCTURED_OUTPUT)
def schema_compile(
    stream: StreamEvidence,
    log_facts: LogFacts | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    compile_ratio: float = 2.0,
    min_excess_s: float = 0.1,
    ttft_target_s: float = 0.5,
) -> Result:
    run = constrained_run(stream)
    first, repeats = run.constrained[0], run.constrained[1:]
    found = Found(first, request_ttft(first), statistics.median(request_ttft(r) for r in repeats), len(repeats),
                  statistics.median(request_ttft(r) for r in run.controls), len(run.controls), tuple(run.constraints),
                  engine_setting("structured_outputs_backend", log_facts))
    first_s, baseline = found.first_s, found.baseline
    if first_s < compile_ratio * baseline or first_s - baseline < min_excess_s:
        return Pass(_no_compile(found))
    return Fire(
        title="The schema's first request waits for its grammar to compile",
        summary=_summary(found),
        remediation=_remediation(found, engine.id),
        felt=first_s > ttft_target_s,  # the compile lands on one request: felt only past the first-token budget
        evidence=_evidence(found),
    )


def _compared(found: Found) -> str:
    return (f"first constrained request TTFT {fmt_seconds(found.first_s)}, repeats median {fmt_seconds(found.repeat_s)} "
            f"(n={found.repeats}), unconstrained twin {fmt_seconds(found.twin_s)} (n={found.twins})")


def _no_compile(found: Found) -> str:
    return _compared(found) + ": no first-request compile stands out"


def _summary(found: Found) -> str:
    return _compared(found) + f": the schema's compile cost about {fmt_seconds(found.first_s - found.baseline)} once"


def _evidence(found: Found) -> list[EvidenceValue]:
    first = found.first
    evidence = [
        EvidenceValue("first constrained TTFT", found.first_s, "s", f"stream: {first.path} request {first.index}"
                      + (" (warm-up)" if first.warmup else "")),
        EvidenceValue("repeats' median TTFT", found.repeat_s, "s", f"stream: n={found.repeats} constrained requests"),
        EvidenceValue("unconstrained twin TTFT", found.twin_s, "s", f"stream: controls, n={found.twins}"),
        EvidenceValue("constraints", ", ".join(found.constraints), "", "run: the --payload body"),
    ]
    if found.backend is not None:
        evidence.append(found.backend.evidence("structured-output backend"))
    return evidence


def _remediation(found: Found, engine: str) -> Remediation:
    flag = ' (--structured-outputs-config \'{"backend": "xgrammar"}\')' if engine == VLLM else ""
    return Remediation(
        setting="structured_outputs_config",
        suggested=("warm each schema before taking traffic (one request per distinct schema after start), "
                   f'with the grammar backend "xgrammar", which caches compiled grammars{flag}'),
        why=("the first request per schema waited for its grammar while the repeats and the same prompt "
             "unconstrained did not: the compile, not the prompt or the queue"),
        verify=rerun("the first constrained request's TTFT near the repeats' after a warm-up per schema"),
        current=str(found.backend.value) if found.backend is not None else None,
        where=engine_flag(engine, "structured_outputs_config"),
    )
