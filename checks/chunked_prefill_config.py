"""Chunked prefill is off and one step cannot hold a full-length prompt.

What it detects:
Chunked prefill is disabled while `max_num_batched_tokens` (the tokens one engine step may
process) is smaller than `max_model_len`: a prompt longer than one step's budget can never be
prefilled in one piece.

Why it matters:
Without chunked prefill a prompt must fit one step. Older vLLM refuses to start with this
combination; where it starts (or the values come from a config that is about to be deployed),
long prompts are rejected or wait forever, and raising `max_model_len` alone promises context
the scheduler cannot serve.

Evidence:
Startup log (or run record): `chunked_prefill` / `enable_chunked_prefill`,
`max_num_batched_tokens`, `max_model_len` (else /v1/models).

Remediation:
Raise `max_num_batched_tokens` to at least `max_model_len` (or turn chunked prefill on with
`--enable-chunked-prefill`, which lets a step take part of a prompt; on vLLM V1 it is always on).

Example:
LD402 chunked-prefill-config: chunked prefill off with max_num_batched_tokens 2,048 <
max_model_len 8,192 -> max_num_batched_tokens 8192.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_setting, is_off, model_len, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.evidence import EndpointsEvidence, RunRecord
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """Chunked prefill off, and the step budget against the longest prompt the model accepts."""

    chunked: Setting
    batched: Setting
    mml: Setting


@check(code="LD402", name="chunked-prefill-config", symptom=SymptomClass.CAPACITY_CONFIG, cause=Cause.CONFIG)
def chunked_prefill_config(
    log_facts: LogFacts,
    endpoints: EndpointsEvidence | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
) -> Result:
    chunked = engine_setting("chunked_prefill", log_facts, run) or engine_setting(
        "enable_chunked_prefill", log_facts, run
    )
    if chunked is None:
        return NotApplicable("whether chunked prefill is on is not in the log or the run record")
    if not is_off(chunked.value):
        return Pass("chunked prefill is on: a long prompt is split across steps")
    batched = engine_setting("max_num_batched_tokens", log_facts, run)
    mml = model_len(log_facts, run, endpoints)
    if batched is None or mml is None:
        return NotApplicable("max_num_batched_tokens or max_model_len is not in the log")
    found = Found(chunked, batched, mml)
    if batched.value >= mml.value:
        return Pass(_step_holds_it(found))
    return Fire(
        felt=False,  # a configuration: what it costs shows as LD202 or a TTFT witness
        title="Chunked prefill is off and one step cannot hold a full-length prompt",
        summary=_summary(found),
        remediation=_remediation(found, engine.id),
        severity=Severity.WARNING,
        evidence=_evidence(found),
    )


def _step_holds_it(found: Found) -> str:
    return f"max_num_batched_tokens {found.batched.value:,} >= max_model_len {found.mml.value:,}"


def _summary(found: Found) -> str:
    batched, mml = found.batched.value, found.mml.value
    return (f"chunked prefill off with max_num_batched_tokens {batched:,} < max_model_len {mml:,}: "
            f"prompts longer than {batched:,} tokens cannot be prefilled")


def _evidence(found: Found) -> list[EvidenceValue]:
    return [
        found.chunked.evidence("chunked prefill"),
        found.batched.evidence("max_num_batched_tokens", "tokens"),
        found.mml.evidence("max_model_len", "tokens"),
    ]


def _remediation(found: Found, engine: str) -> Remediation:
    return Remediation(
        setting="max_num_batched_tokens",
        suggested=str(found.mml.value),
        current=str(found.batched.value),
        where=engine_flag(engine, "max_num_batched_tokens"),
        why=(
            "Without chunked prefill a whole prompt must fit one engine step of max_num_batched_tokens. "
            "Raising it to max_model_len serves every prompt the model accepts; alternatively "
            "--enable-chunked-prefill splits long prompts across steps."
        ),
        verify=rerun("the engine starts and a prompt near max_model_len gets its first token"),
    )
