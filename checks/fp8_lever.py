"""FP8 weights or an FP8 KV cache would hold many more sequences, or fit a smaller card.

What it detects:
The served model (`--model-dir`), sized under the log's setup, keeps 16-bit weights or a 16-bit KV
cache, and the same GPU memory in fp8 (fp8 weights leave their bytes to the KV cache; an fp8 KV
cache halves the bytes per token) holds at least `min_gain` times the full-length sequences; or
fp8 weights plus the same KV tokens in fp8 fit a smaller card of the table at the same
`gpu_memory_utilization`.

Why it matters:
Seed 004's memory budget: weights are parameters x bytes per parameter and the KV cache is bytes
per token x tokens in flight. FP8 halves both, so the same card batches about twice the sequences
(less queueing and preemption under load), or the same load fits a cheaper card. It changes the
model's outputs, so it is a decision for an evaluation of the task, never a silent switch.

Evidence:
Sizing (`--model-dir` with the startup log): weight bytes and KV bytes per token per rank, the KV
cache the log's budget gives, and the same in fp8. GPU probe (NVML) or the log's memory profile:
the card's total memory. Startup log (or run record): `gpu_memory_utilization`. Metrics window:
preemptions and KV usage, to say whether the capacity is needed now.

Remediation:
`--quantization fp8` (or an fp8 checkpoint) with `--kv-cache-dtype fp8`; only the KV cache
dtype when the weights are already 8-bit. Gate the switch on an evaluation of your task.

Options:
min_gain: fp8 sequences / current sequences at or above which it fires

Example:
LD407 fp8-lever: bfloat16 weights (14.96 GiB per rank) and kv_cache_dtype auto hold 497,488 KV
tokens (60.73x at 8,192); in fp8 1,101,488 tokens (2.2x the sequences), or the same 497,488 tokens
on an L40S (45 GiB) -> quantization fp8 with kv_cache_dtype fp8, after an evaluation gate.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_setting, rerun_gated
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import GpuEvidence, RunRecord
from doctor.foundation.units import fmt_pct
from doctor.model import EvidenceValue, Remediation, Severity, SymptomClass
from doctor.sizing.budget import DEFAULT_GPU_MEMORY_UTILIZATION, GiB, smallest_card


@dataclass(frozen=True)
class Found:
    """Today's format (weights' method or dtype, their bytes per rank, the KV cache dtype) and what
    its KV cache holds, against fp8's: its tokens (``gain`` times as many), a smaller card that
    would hold today's tokens, and whether the window showed the capacity was needed (preemptions,
    else the KV usage peak when near full)."""

    engine: str
    method: str | None
    model_dtype: str
    weights_bytes: float
    kv_dtype: str
    tokens: int
    max_concurrency: float
    length: int
    fp8_tokens: int
    gain: float
    card: tuple[str, int] | None
    util: Setting | None
    preemptions: float | None
    kv_full: float | None
    kv_only: bool


@check(code="LD407", name="fp8-lever", symptom=SymptomClass.CAPACITY_CONFIG, cause="capacity")
def fp8_lever(
    sizing: dict[str, Any],
    gpu: GpuEvidence | None = None,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    metrics_window: MetricsWindow | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_gain: float = 1.5,
) -> Result:
    tokens, fp8 = sizing.get("kv_cache_tokens"), sizing.get("with_fp8")
    if not tokens or not sizing.get("kv_cache_memory_bytes"):
        return NotApplicable("no KV cache budget to size against (the log states none; pass --log with the startup)")
    weights = sizing["weights_format"]
    if fp8 is None:
        return Pass(_eight_bit_already(sizing))
    fixed = log_facts is not None and bool(log_facts.value("kv_cache_memory_bytes"))
    fp8_tokens = _fp8_tokens(sizing, fp8, fixed)
    util = engine_setting("gpu_memory_utilization", log_facts, run)
    utilization = float(util.value) if util is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    mw = metrics_window
    found = Found(
        engine=engine.id, method=weights["method"], model_dtype=weights["model_dtype"],
        weights_bytes=sizing["weights_bytes_per_rank"], kv_dtype=sizing["kv_cache_dtype"], tokens=tokens,
        max_concurrency=sizing["max_concurrency"], length=sizing["max_model_len"], fp8_tokens=fp8_tokens,
        gain=fp8_tokens / tokens, card=_smaller_card(sizing, fp8, gpu, log_facts, utilization), util=util,
        preemptions=mw.preemptions if mw is not None and mw.preemptions else None,
        kv_full=(mw.kv_usage.max if mw is not None and not mw.preemptions and mw.kv_usage is not None
                 and mw.kv_usage.max is not None and mw.kv_usage.max >= 0.9 else None),
        kv_only=weights["linear_bytes_per_param"] <= 1,
    )
    if found.gain < min_gain and found.card is None:
        return Pass(_small_gain(found, min_gain))
    return Fire(
        felt=False,  # a lever, not a wait users had
        title=_title(found),
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.INFO,
        evidence=_evidence(found, sizing, fp8),
    )


def _fp8_tokens(sizing: dict[str, Any], fp8: dict[str, Any], fixed_budget: bool) -> int:
    """The fp8 KV tokens. The sizing keeps a byte budget from the log as given; when vLLM profiled
    it (not ``--kv-cache-memory-bytes``), the bytes fp8 weights give back go to the KV cache too."""
    tokens = int(fp8["kv_cache_tokens"])
    if fixed_budget or sizing.get("kv_cache_memory_upper_bound"):  # a card budget: weights subtracted already
        return tokens
    freed = sizing["weights_bytes_per_rank"] - fp8["weights_bytes_per_rank"]
    block = sizing["block_size"]
    return tokens + max(0, int(freed // fp8["kv_bytes_per_token_per_rank"]) // block * block)


def _smaller_card(sizing: dict[str, Any], fp8: dict[str, Any], gpu: GpuEvidence | None, log_facts: LogFacts | None,
                  utilization: float) -> tuple[str, int] | None:
    """The smallest card whose share holds fp8 weights, today's tokens in fp8 and today's other
    allocations (what the card's share holds beyond weights and KV cache), when the card is known."""
    total = _card_bytes(gpu, log_facts)
    if total is None:
        return None
    other = max(0.0, total * utilization - sizing["weights_bytes_per_rank"] - sizing["kv_cache_memory_bytes"])
    needed = fp8["weights_bytes_per_rank"] + sizing["kv_cache_tokens"] * fp8["kv_bytes_per_token_per_rank"] + other
    return smallest_card(needed, utilization, below_bytes=total)


def _card_bytes(gpu: GpuEvidence | None, log_facts: LogFacts | None) -> float | None:
    """The serving card's memory: NVML's total, else the log's memory profile."""
    if gpu is not None and gpu.available:
        totals = [d.memory_total_bytes for d in gpu.devices if d.memory_total_bytes]
        if totals:
            return float(min(totals))
    gib = log_facts.value("total_gpu_memory_gib") if log_facts is not None else None
    return float(gib) * GiB if isinstance(gib, (int, float)) and gib > 0 else None


def _stored(method: str | None, model_dtype: str) -> str:
    return model_dtype if method in (None, "none") else f"{method}-quantised"


def _now(stored: str, weights_bytes: float, kv_dtype: str) -> str:
    return f"{stored} weights ({weights_bytes / GiB:.2f} GiB per rank) and kv_cache_dtype {kv_dtype}"


def _eight_bit_already(sizing: dict[str, Any]) -> str:
    weights = sizing["weights_format"]
    now = _now(_stored(weights["method"], weights["model_dtype"]), sizing["weights_bytes_per_rank"],
               sizing["kv_cache_dtype"])
    return f"{now}: weights and KV cache are 8-bit already"


def _holds(found: Found) -> str:
    now = _now(_stored(found.method, found.model_dtype), found.weights_bytes, found.kv_dtype)
    return f"{now} hold {found.tokens:,} KV tokens ({found.max_concurrency:.2f}x at {found.length:,})"


def _small_gain(found: Found, min_gain: float) -> str:
    return (f"{_holds(found)}; fp8 would hold {found.fp8_tokens:,} ({found.gain:.1f}x), below the {min_gain:.1f}x "
            "worth a switch")


def _title(found: Found) -> str:
    return "FP8 would hold more sequences" + (" or fit a smaller card" if found.card else "")


def _summary(found: Found) -> str:
    summary = f"{_holds(found)}; in fp8 {found.fp8_tokens:,} tokens ({found.gain:.1f}x the sequences)"
    if found.card is not None:
        summary += f", or the same {found.tokens:,} tokens on an {found.card[0]} ({found.card[1] / GiB:.0f} GiB)"
    if found.preemptions:
        summary += f"; the window had {found.preemptions:,.0f} preemptions"
    elif found.kv_full is not None:
        summary += f"; the window had KV cache usage up to {fmt_pct(found.kv_full)}"
    return summary


def _evidence(found: Found, sizing: dict[str, Any], fp8: dict[str, Any]) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue("KV cache size", found.tokens, "tokens", f"sizing: {sizing.get('kv_cache_memory_source')}"),
        EvidenceValue("KV cache size in fp8", found.fp8_tokens, "tokens", "sizing: fp8 weights and kv_cache_dtype fp8"),
        EvidenceValue("weights per rank", round(found.weights_bytes / GiB, 2), "GiB", "sizing: model config"),
        EvidenceValue("weights per rank in fp8", round(fp8["weights_bytes_per_rank"] / GiB, 2), "GiB", "sizing: model config"),
        EvidenceValue("KV bytes per token per rank", sizing["kv_bytes_per_token_per_rank"], "bytes", "sizing: model config"),
    ]
    if found.util is not None:
        evidence.append(found.util.evidence("gpu_memory_utilization"))
    return evidence


def _remediation(found: Found) -> Remediation:
    kv_only = found.kv_only
    return Remediation(
        setting="kv_cache_dtype" if kv_only else "quantization",
        suggested="fp8" if kv_only else "fp8, with kv_cache_dtype fp8",
        current=found.kv_dtype if kv_only else str(found.method),
        where=engine_flag(found.engine, *(("kv_cache_dtype",) if kv_only else ("quantization", "kv_cache_dtype"))),
        why=(f"fp8 stores a weight or a KV element in 1 byte instead of 2: the same memory holds {found.gain:.1f}x the "
             "KV tokens, so more sequences batch at once before anything queues or is preempted. fp8 changes the "
             "model's outputs: gate the switch on an evaluation of your task (accuracy within your tolerance)."),
        verify=rerun_gated(f"the startup log's KV cache size near {found.fp8_tokens:,} tokens, and your evaluation's "
                           "scores within tolerance", long_context=True),  # both suggestions make the KV cache fp8
    )
