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

from typing import Any

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_flag, engine_setting, rerun_gated
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import GpuEvidence, RunRecord
from doctor.foundation.units import fmt_pct
from doctor.model import EvidenceValue, Remediation, Severity, SymptomClass
from doctor.sizing.budget import DEFAULT_GPU_MEMORY_UTILIZATION, GiB, smallest_card


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
    stored = weights["model_dtype"] if weights["method"] in (None, "none") else f"{weights['method']}-quantised"
    now = (f"{stored} weights ({sizing['weights_bytes_per_rank'] / GiB:.2f} GiB per rank) and "
           f"kv_cache_dtype {sizing['kv_cache_dtype']}")
    if fp8 is None:
        return Pass(f"{now}: weights and KV cache are 8-bit already")
    fixed = log_facts is not None and bool(log_facts.value("kv_cache_memory_bytes"))
    fp8_tokens = _fp8_tokens(sizing, fp8, fixed)
    gain = fp8_tokens / tokens
    util = engine_setting("gpu_memory_utilization", log_facts, run)
    utilization = float(util.value) if util is not None else DEFAULT_GPU_MEMORY_UTILIZATION
    card = _smaller_card(sizing, fp8, gpu, log_facts, utilization)
    length = sizing["max_model_len"]
    holds = f"{now} hold {tokens:,} KV tokens ({sizing['max_concurrency']:.2f}x at {length:,})"
    if gain < min_gain and card is None:
        return Pass(f"{holds}; fp8 would hold {fp8_tokens:,} ({gain:.1f}x), below the {min_gain:.1f}x worth a switch")
    summary = f"{holds}; in fp8 {fp8_tokens:,} tokens ({gain:.1f}x the sequences)"
    if card is not None:
        summary += f", or the same {tokens:,} tokens on an {card[0]} ({card[1] / GiB:.0f} GiB)"
    pressure = _pressure(metrics_window)
    if pressure:
        summary += f"; the window had {pressure}"
    evidence = [
        EvidenceValue("KV cache size", tokens, "tokens", f"sizing: {sizing.get('kv_cache_memory_source')}"),
        EvidenceValue("KV cache size in fp8", fp8_tokens, "tokens", "sizing: fp8 weights and kv_cache_dtype fp8"),
        EvidenceValue("weights per rank", round(sizing["weights_bytes_per_rank"] / GiB, 2), "GiB", "sizing: model config"),
        EvidenceValue("weights per rank in fp8", round(fp8["weights_bytes_per_rank"] / GiB, 2), "GiB", "sizing: model config"),
        EvidenceValue("KV bytes per token per rank", sizing["kv_bytes_per_token_per_rank"], "bytes", "sizing: model config"),
    ]
    if util is not None:
        evidence.append(util.evidence("gpu_memory_utilization"))
    kv_only = weights["linear_bytes_per_param"] <= 1
    engine_id = engine.id
    return Fire(
        felt=False,  # a lever, not a wait users had
        title="FP8 would hold more sequences" + (" or fit a smaller card" if card else ""),
        summary=summary,
        remediation=Remediation(
            setting="kv_cache_dtype" if kv_only else "quantization",
            suggested="fp8" if kv_only else "fp8, with kv_cache_dtype fp8",
            current=sizing["kv_cache_dtype"] if kv_only else str(weights["method"]),
            where=engine_flag(engine_id, *(("kv_cache_dtype",) if kv_only else ("quantization", "kv_cache_dtype"))),
            why=(f"fp8 stores a weight or a KV element in 1 byte instead of 2: the same memory holds {gain:.1f}x the "
                 "KV tokens, so more sequences batch at once before anything queues or is preempted. fp8 changes the "
                 "model's outputs: gate the switch on an evaluation of your task (accuracy within your tolerance)."),
            verify=rerun_gated(f"the startup log's KV cache size near {fp8_tokens:,} tokens, and your evaluation's scores "
                               "within tolerance", long_context=True),  # both suggestions make the KV cache fp8
        ),
        severity=Severity.INFO,
        evidence=evidence,
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


def _pressure(mw: MetricsWindow | None) -> str | None:
    """Signs in the window that more KV capacity is needed now: preemptions, a full KV cache."""
    if mw is None:
        return None
    if mw.preemptions:
        return f"{mw.preemptions:,.0f} preemptions"
    if mw.kv_usage is not None and mw.kv_usage.max is not None and mw.kv_usage.max >= 0.9:
        return f"KV cache usage up to {fmt_pct(mw.kv_usage.max)}"
    return None
