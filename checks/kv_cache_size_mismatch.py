"""The engine's KV cache is not the size the model's config gives for its budget.

What it detects:
vLLM's own KV arithmetic, run on the served model's `config.json` (`--model-dir`) under the
log's setup (dtype, `kv_cache_dtype`, `tensor_parallel_size`, block size, `max_model_len`), gives a
KV cache size for the log's budget (`--kv-cache-memory-bytes` exactly, or the "Available KV cache
memory" it printed to 0.01 GiB) that differs from the log's "KV cache size: N tokens" beyond
block rounding, or the same cache gives another "Maximum concurrency". Setups one setting away
(another KV cache dtype, TP degree or model dtype) are tried, and those that land on N named.

Why it matters:
Every capacity decision (max_num_seqs, max_model_len, how many cards) rests on KV bytes per
token. When the engine keeps twice the bytes the config implies, the model is not served the
way the operator thinks: an fp8 KV cache they did not ask for (or lost), a TP degree other than
the one planned, float32 activations, or a model directory that is not the served model.

Evidence:
Startup log: KV cache size in tokens, KV memory (bytes from the non-default args, else GiB),
dtype, kv_cache_dtype, tensor_parallel_size, block size, max_model_len, Maximum concurrency.
Model config: the checkpoint's `config.json` (layers, KV heads, head dim, MLA ranks, sliding windows).

Remediation:
The setting whose other value reproduces the log's capacity (`kv_cache_dtype`,
`tensor_parallel_size` or `dtype`), to be set to what was intended; when none does, check that
`--model-dir` is the model the engine serves. A `kv_cache_dtype` or `dtype` change changes the
model's numbers: its verify step names the `llm-doctor verify` gate (`--long-context` for the KV cache).

Example:
LD406 kv-cache-size-mismatch: the log's 1,073,741,824 bytes give 65,536 tokens at 16,384 bytes per
token (config: 8 layers x 8 KV heads x 64 x bfloat16), the engine reports 131,072 (8,192 bytes per
token) -> matches kv_cache_dtype fp8 (log: auto) or tensor_parallel_size 2 (log: 1).
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import rerun, rerun_gated, vllm_flag
from doctor.derive.log_facts import LogFacts
from doctor.evidence import ModelConfigEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass
from doctor.sizing.against_log import LogComparison, NotComparable, compare_with_log
from doctor.sizing.architecture import Architecture, parse_architecture

#: The settings whose change changes the model's numbers, not only its memory: the answers gate verifies them too.
NUMERICS = ("kv_cache_dtype", "dtype")


@dataclass(frozen=True)
class Found:
    """The model's architecture, its comparison with the startup log's KV cache (``doctor.sizing``:
    the numbers, whether they agree, the one-setting changes that would reproduce the log's), and
    where the config was read."""

    arch: Architecture
    cmp: LogComparison
    config_source: str


@check(code="LD406", name="kv-cache-size-mismatch", symptom=SymptomClass.CAPACITY_CONFIG, cause=Cause.CAPACITY)
def kv_cache_size_mismatch(log_facts: LogFacts, model_config: ModelConfigEvidence) -> Result:
    arch = parse_architecture(model_config.text, model_config.source)
    try:
        cmp = compare_with_log(arch, log_facts)
    except NotComparable as exc:
        return NotApplicable(str(exc))
    found = Found(arch, cmp, model_config.source)
    if cmp.agrees:
        return Pass(_agrees(found))
    return Fire(
        felt=False,  # a sizing mismatch, not a wait users had
        title="The KV cache is not the size the model's config gives",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING,
        evidence=_evidence(cmp),
    )


def _computed(found: Found) -> str:
    arch, cmp = found.arch, found.cmp
    per_token = f"{cmp.bytes_per_token:,} bytes per token ({arch.layers} layers, {_per_layer(arch, cmp)})"
    return f"{cmp.budget_source} gives {cmp.expected_text} KV tokens at {per_token}"


def _agrees(found: Found) -> str:
    cmp = found.cmp
    conc = f", {cmp.reported_concurrency:.2f}x at {cmp.concurrency_tokens:,} tokens" if cmp.reported_concurrency else ""
    return f"{_computed(found)}; the engine reports {cmp.reported_tokens:,}{conc}"


def _summary(found: Found) -> str:
    cmp = found.cmp
    if not cmp.tokens_agree:
        implied = f" ({cmp.implied_bytes_per_token:,.0f} bytes per token)" if cmp.implied_bytes_per_token else ""
        summary = f"{_computed(found)}; the engine reports {cmp.reported_tokens:,}{implied}"
    else:
        summary = (f"{_computed(found)} as the engine reports, but its concurrency {cmp.reported_concurrency:.2f}x at "
                   f"{cmp.concurrency_tokens:,} tokens differs from the {cmp.expected_concurrency:.2f}x these blocks give")
    if cmp.alternatives:
        summary += " -> matches " + " or ".join(f"{a.setting} {a.value} (log: {a.current})" for a in cmp.alternatives)
    return summary


def _remediation(found: Found) -> Remediation:
    cmp = found.cmp
    if cmp.alternatives:
        first = cmp.alternatives[0]
        expect = f"the startup log's KV cache size equals {cmp.expected_text} tokens for this budget"
        return Remediation(
            setting=first.setting,
            suggested=f"the value you intend (the engine behaves as with {first.value})",
            current=first.current,
            where=vllm_flag(first.setting),
            why=(f"The engine's {cmp.reported_tokens:,} KV tokens are what this model gets with {first.setting} "
                 f"{first.value}, not with the logged {first.current}: every capacity figure (max_num_seqs, "
                 "max_model_len, cards needed) computed from the plan is off by the same factor."),
            verify=(rerun_gated(expect, long_context=first.setting == "kv_cache_dtype") if first.setting in NUMERICS
                    else rerun(expect)),
        )
    return Remediation(
        setting="--model-dir",
        suggested="the directory of the model the engine serves",
        current=found.config_source,
        where="llm-doctor diagnose --model-dir",
        why=("No one-setting change to dtype, kv_cache_dtype or tensor_parallel_size reproduces the engine's "
             f"{cmp.reported_tokens:,} tokens: the config read may not be the served model's (or the engine "
             f"pads or quantises its KV cache in a way this version does not model, device {cmp.setup.device})."),
        verify=rerun("LD406 passes"),
    )


def _per_layer(arch: Architecture, cmp: LogComparison) -> str:
    if arch.mla is not None:
        return f"MLA latent {arch.mla.kv_lora_rank}+{arch.mla.qk_rope_head_dim}"
    heads = max(1, arch.kv_heads // cmp.setup.tp)
    return f"{heads} KV heads x {arch.head_dim} per rank, kv_cache_dtype {cmp.setup.kv_cache_dtype}"


def _evidence(cmp: LogComparison) -> list[EvidenceValue]:
    low, high = cmp.expected_tokens
    values = [
        EvidenceValue("KV cache size (log)", cmp.reported_tokens, "tokens", "startup log"),
        EvidenceValue("KV cache size (computed)", low if low == high else f"{low}-{high}", "tokens", f"model config, {cmp.budget_source}"),
        EvidenceValue("KV bytes per token (computed, one rank)", cmp.bytes_per_token, "bytes", "model config"),
    ]
    if cmp.implied_bytes_per_token:
        values.append(EvidenceValue("KV bytes per token (log)", round(cmp.implied_bytes_per_token), "bytes", "budget / KV tokens"))
    if cmp.reported_concurrency is not None and cmp.expected_concurrency is not None:
        values.append(EvidenceValue("maximum concurrency (log)", cmp.reported_concurrency, "x", "startup log"))
        values.append(EvidenceValue("maximum concurrency (computed)", round(cmp.expected_concurrency, 2), "x", "log's KV tokens"))
    return values
