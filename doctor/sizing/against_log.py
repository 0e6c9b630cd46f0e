"""The computed KV capacity against the one the engine logged, and what explains a difference.

The log gives the budget (``--kv-cache-memory-bytes`` exactly, or "Available KV cache memory:
X GiB" / "Explicitly set (X/...) GiB" rounded to 0.01 GiB), the setup (dtype, kv_cache_dtype,
tensor_parallel_size, block size, device, max_model_len, a block override) and the result ("KV
cache size: N tokens", "Maximum concurrency ..."). The same arithmetic as vLLM's, run on the
model's config under the log's setup, must land on N exactly, or inside the range a rounded
budget allows. When it does not, the setups one setting away (another KV cache dtype, another
TP degree, another model dtype) are tried: those that land on N name the likely causes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from doctor.logscan.parsed import LogFacts
from doctor.sizing.architecture import Architecture
from doctor.sizing.budget import Budget, GiB
from doctor.sizing.kv import DEFAULT_MAX_NUM_BATCHED_TOKENS, kv_layout
from doctor.sizing.model_fit import Setup, Sizing, size_model

GIB_HALF_STEP = 0.005  # vLLM prints GiB with 2 decimals (format_gib)


@dataclass(frozen=True)
class Alternative:
    """One setting changed from the log's value under which the computed capacity lands on the
    logged tokens: a likely cause of the mismatch, said as the setting to check.
    """

    setting: str  # a vllm serve setting, e.g. "kv_cache_dtype"
    value: str  # the value under which the computed capacity equals the log's
    current: str  # the value the log states (or the default it implies)


@dataclass(frozen=True)
class LogComparison:
    """The capacity computed under the log's setup and budget next to the one the engine logged.

    ``expected_tokens`` is a range because a budget printed in GiB is rounded; ``alternatives`` is
    filled only when the tokens disagree.
    """

    setup: Setup
    budget_bytes: tuple[int, int] | None  # (low, high); equal when the log states bytes; None with a block override
    budget_source: str
    expected_tokens: tuple[int, int]
    reported_tokens: int
    bytes_per_token: int  # computed, one rank
    implied_bytes_per_token: float | None  # the log's budget / its tokens
    expected_concurrency: float | None  # from the reported cache at the reported tokens per request
    reported_concurrency: float | None
    concurrency_tokens: int | None
    alternatives: tuple[Alternative, ...] = ()  # one-setting changes that land on the log's tokens

    @property
    def tokens_agree(self) -> bool:
        return self.expected_tokens[0] <= self.reported_tokens <= self.expected_tokens[1]

    @property
    def concurrency_agrees(self) -> bool:
        if self.expected_concurrency is None or self.reported_concurrency is None:
            return True
        return f"{self.expected_concurrency:.2f}" == f"{self.reported_concurrency:.2f}"

    @property
    def agrees(self) -> bool:
        return self.tokens_agree and self.concurrency_agrees

    @property
    def expected_text(self) -> str:
        low, high = self.expected_tokens
        return f"{low:,}" if low == high else f"{low:,}-{high:,}"


class NotComparable(ValueError):
    """The log lacks what a comparison needs (its KV cache size, or any budget)."""


def log_setup(facts: LogFacts) -> Setup:
    """The setup a startup log states; what it does not state is vLLM's default."""
    device = "cpu" if str(facts.value("kv_cache_device", "")).upper() == "CPU" else "cuda"
    return Setup(
        dtype=facts.value("dtype") or None,
        kv_cache_dtype=str(facts.value("kv_cache_dtype") or "auto"),
        tp=int(facts.value("tensor_parallel_size") or 1),
        block_size=facts.value("block_size"),
        device=device,
        max_model_len=facts.value("max_model_len") or facts.value("max_concurrency_tokens"),
        max_num_batched_tokens=facts.value("max_num_batched_tokens"),
        num_gpu_blocks_override=facts.value("num_gpu_blocks_override"),
    )


def _budget(facts: LogFacts) -> tuple[tuple[int, int] | None, str]:
    if facts.value("num_gpu_blocks_override") is not None:
        return None, f"num_gpu_blocks_override {facts.value('num_gpu_blocks_override')}"
    exact = facts.value("kv_cache_memory_bytes")
    if exact:
        return (int(exact), int(exact)), f"kv_cache_memory_bytes {int(exact):,}"
    gib = facts.value("kv_cache_memory_gib")
    if gib:
        low, high = max(0.0, gib - GIB_HALF_STEP), gib + GIB_HALF_STEP
        return (int(low * GiB), int(high * GiB)), f"KV cache memory {gib} GiB (printed to 0.01 GiB)"
    raise NotComparable("the log states no KV cache memory (kv_cache_memory_bytes, 'Available KV cache memory')")


def _tokens(arch: Architecture, setup: Setup, budget: tuple[int, int] | None) -> tuple[int, int]:
    low, high = budget or (None, None)
    results = []
    for mem in (low, high):
        sizing = size_model(arch, setup, Budget(mem, "log") if mem is not None else None)
        assert sizing.capacity is not None
        results.append(sizing.capacity.tokens)
    return results[0], results[1]


def _alternatives(arch: Architecture, setup: Setup) -> list[tuple[Alternative, Setup]]:
    """Setups one setting away from the log's, the likeliest first."""
    kv_now = setup.kv_cache_dtype
    options: list[tuple[Alternative, Setup]] = []
    for kv in ("fp8", "auto", "float32"):
        if kv != kv_now and not (kv.startswith("fp8") and kv_now.startswith("fp8")):
            options.append((Alternative("kv_cache_dtype", kv, kv_now), replace(setup, kv_cache_dtype=kv)))
    for tp in (1, 2, 4, 8):
        if tp != setup.tp:
            options.append((Alternative("tensor_parallel_size", str(tp), str(setup.tp)), replace(setup, tp=tp)))
    for dtype in ("float32", "bfloat16"):
        if dtype != (setup.dtype or arch.dtype):
            options.append((Alternative("dtype", dtype, setup.dtype or "auto"), replace(setup, dtype=dtype)))
    return options


def compare_with_log(arch: Architecture, facts: LogFacts) -> LogComparison:
    """The model's computed capacity under the log's setup, next to what the log reports."""
    reported = facts.value("kv_cache_tokens")
    if not reported:
        raise NotComparable("the log has no 'KV cache size: N tokens' line")
    setup = log_setup(facts)
    if not setup.max_model_len:
        raise NotComparable("the log states no max_model_len")
    budget, source = _budget(facts)
    expected = _tokens(arch, setup, budget)
    layout = kv_layout(arch, model_dtype=size_model(arch, setup).weights.model_dtype, kv_cache_dtype=setup.kv_cache_dtype,
                       tp=setup.tp, block_size=setup.block_size, device=setup.device)
    conc, conc_tokens = facts.value("max_concurrency"), facts.value("max_concurrency_tokens")
    expected_conc = None
    groups = layout.groups()
    if conc is not None and conc_tokens and len(groups) == 1:  # a hybrid's token count hides its block remainder
        (spec, _), blocks = groups[0], int(reported) // layout.block_size
        expected_conc = blocks / spec.blocks(int(conc_tokens), layout.block_size, setup.max_num_batched_tokens or DEFAULT_MAX_NUM_BATCHED_TOKENS)
    implied = None
    if budget is not None:
        implied = (budget[0] + budget[1]) / 2 / int(reported)
    result = LogComparison(
        setup=setup, budget_bytes=budget, budget_source=source, expected_tokens=expected, reported_tokens=int(reported),
        bytes_per_token=layout.bytes_per_token, implied_bytes_per_token=implied, expected_concurrency=expected_conc,
        reported_concurrency=conc, concurrency_tokens=conc_tokens,
    )
    if result.tokens_agree:
        return result
    found = tuple(alt for alt, other in _alternatives(arch, setup) if _contains(_tokens(arch, other, budget), int(reported)))
    return replace(result, alternatives=found)


def _contains(bounds: tuple[int, int], tokens: int) -> bool:
    return bounds[0] <= tokens <= bounds[1]



def sizing_from_log(arch: Architecture, facts: LogFacts) -> tuple[Sizing, LogComparison | None]:
    """The model sized under the log's setup and budget, with the comparison when the log allows one.

    A budget the log printed in GiB is taken at its printed value (the comparison allows the
    rounding); without a budget the sizing has no capacity, only weights and KV per token.
    """
    setup = log_setup(facts)
    try:
        comparison = compare_with_log(arch, facts)
    except NotComparable:
        return size_model(arch, setup), None
    budget = None
    if comparison.budget_bytes is not None:
        low, high = comparison.budget_bytes
        budget = Budget(low if low == high else (low + high) // 2, comparison.budget_source)
    return size_model(arch, setup, budget), comparison
