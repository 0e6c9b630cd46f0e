"""Sizing arithmetic: parameter counts of public architectures, weight bytes, and vLLM's KV capacity.

The parameter counts are checked against the totals the model cards publish; the KV capacity
against what real vLLM logs printed for the same model and budget (the real-vLLM stage's tiny
Llama on vLLM 0.32.0, Qwen3-14B on vLLM 0.10.2), so the arithmetic is vLLM's to the token.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.bundle import load_path
from doctor.derive.log_facts import derive_log_facts
from doctor.engine_readers.vllm import parse_lines
from doctor.probes.logfile import read_log
from doctor.probes.model_config import read_model_config
from doctor.sizing.against_log import NotComparable, compare_with_log
from doctor.sizing.architecture import ConfigError, parse_architecture
from doctor.sizing.budget import Budget, GiB, budget_from_card, gpu_memory, parse_bytes
from doctor.sizing.kv import kv_layout
from doctor.sizing.model_fit import Setup, size_model
from doctor.sizing.sizing_json import summary

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "fixtures" / "model-configs"

#: Published totals: the model cards' parameter counts (Hugging Face's safetensors totals where the
#: card rounds harder), and for MoE models the active parameters per token the papers give.
PUBLISHED = {
    "llama-3-8b": 8.03e9,  # meta-llama/Meta-Llama-3-8B: 8.03B
    "llama-3-70b": 70.6e9,  # meta-llama/Meta-Llama-3-70B: 70.6B
    "qwen2.5-7b": 7.61e9,  # Qwen/Qwen2.5-7B card: 7.61B
    "qwen2.5-0.5b": 494e6,  # Qwen/Qwen2.5-0.5B: 494M (the card's "0.49B"), tied embeddings
    "qwen3-14b": 14.8e9,  # Qwen/Qwen3-14B card: 14.8B
    "mistral-7b-v0.1": 7.24e9,  # mistralai/Mistral-7B-v0.1: 7.24B
    "mixtral-8x7b-v0.1": 46.7e9,  # Mixtral of Experts paper: 46.7B total
    "deepseek-v2-lite": 15.7e9,  # deepseek-ai/DeepSeek-V2-Lite card: 15.7B total
    "deepseek-v3": 671e9,  # DeepSeek-V3 report: 671B total (without the 14B MTP module)
    "gemma-7b": 8.54e9,  # google/gemma-7b: 8.54B, tied embeddings
    "gemma-2-9b": 9.24e9,  # google/gemma-2-9b: 9.24B, tied embeddings
}


def arch(name: str, **changes: object):
    raw = json.loads((CONFIGS / name / "config.json").read_text())
    return parse_architecture(json.dumps({**raw, **changes}), name)


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_parameter_count_is_within_half_a_percent_of_the_published_total(name: str) -> None:
    total = size_model(arch(name), Setup()).params.total
    assert abs(total / PUBLISHED[name] - 1) < 0.005, f"{name}: {total:,} vs {PUBLISHED[name]:,.0f}"


def test_active_parameters_of_mixtral_are_the_published_12_9b() -> None:
    params = size_model(arch("mixtral-8x7b-v0.1"), Setup()).params
    assert abs(params.active / 12.9e9 - 1) < 0.005
    assert params.active < params.total / 3  # 2 of 8 experts per token


def test_tied_embeddings_are_counted_once() -> None:
    tied = size_model(arch("qwen2.5-0.5b"), Setup()).params
    untied = size_model(arch("qwen2.5-0.5b", tie_word_embeddings=False), Setup()).params
    assert tied.components["lm_head"] == 0
    assert untied.total - tied.total == 151936 * 896


def test_fp8_weights_are_one_byte_per_linear_weight_and_keep_embeddings_in_16_bit() -> None:
    bf16 = size_model(arch("llama-3-8b"), Setup())
    fp8 = size_model(arch("llama-3-8b"), Setup(dtype="fp8"))
    c = bf16.params.components
    kept = c["embeddings"] + c["lm_head"] + c["norms_biases"]  # 2 x 128256 x 4096 + 65 x 4096
    assert kept == 2 * 128256 * 4096 + 65 * 4096
    assert bf16.weights_bytes == 2 * bf16.params.total
    assert fp8.weights_bytes == (bf16.params.total - kept) + 2 * kept
    assert set(fp8.weights.kept_16bit) >= {"embeddings", "lm_head"}


def test_the_configs_own_quantisation_prices_the_weights() -> None:
    v3 = size_model(arch("deepseek-v3"), Setup())  # fp8 with 128x128 float32 block scales
    assert v3.weights.method == "fp8 (block 128x128)"
    assert 1.0 < v3.weights_bytes / v3.params.total < 1.01
    awq = size_model(arch("llama-3-8b", quantization_config={"quant_method": "awq", "bits": 4, "group_size": 128}), Setup())
    assert awq.weights.method == "awq 4-bit g128"
    assert awq.weights_bytes < size_model(arch("llama-3-8b"), Setup(dtype="fp8")).weights_bytes


def test_kv_bytes_per_token_follow_gqa_head_dim_mla_and_fp8() -> None:
    assert kv_layout(arch("llama-3-8b"), model_dtype="bfloat16").bytes_per_token == 32 * 2 * 8 * 128 * 2
    assert kv_layout(arch("gemma-7b"), model_dtype="bfloat16").bytes_per_token == 28 * 2 * 16 * 256 * 2  # head_dim 256 > 3072/16
    assert kv_layout(arch("deepseek-v3"), model_dtype="bfloat16").bytes_per_token == 61 * (512 + 64) * 2  # one latent, MLA
    assert kv_layout(arch("llama-3-8b"), model_dtype="bfloat16", kv_cache_dtype="fp8").bytes_per_token == 32 * 2 * 8 * 128


def test_kv_heads_split_over_ranks_and_are_replicated_when_fewer() -> None:
    per_rank = [kv_layout(arch("llama-3-70b"), model_dtype="bfloat16", tp=tp).bytes_per_token for tp in (1, 2, 4, 8, 16)]
    assert per_rank == [327680, 163840, 81920, 40960, 40960]  # 8 KV heads: one each from tp 8 on
    assert kv_layout(arch("deepseek-v3"), model_dtype="bfloat16", tp=8).bytes_per_token == 61 * 576 * 2  # MLA: not split


def test_sliding_window_layers_bound_what_a_request_holds() -> None:
    mistral = size_model(arch("mistral-7b-v0.1"), Setup(max_model_len=32768), Budget(10 * GiB, "test"))
    full = size_model(arch("mistral-7b-v0.1", sliding_window=None), Setup(max_model_len=32768), Budget(10 * GiB, "test"))
    assert mistral.capacity.tokens == full.capacity.tokens  # same pool
    # cdiv(4096 - 1 + 2048, 16) + 1 = 385 blocks per request instead of 32768 / 16 = 2048
    assert mistral.capacity.blocks_per_request == 385 and full.capacity.blocks_per_request == 2048


def test_a_hybrid_model_splits_its_layers_into_groups_sharing_one_pool() -> None:
    gemma2 = size_model(arch("gemma-2-9b"), Setup(max_model_len=8192), Budget(10 * GiB, "test"))
    assert gemma2.layout.groups()[0][1] == 21 and gemma2.capacity.groups == 2  # 21 sliding + 21 full layers
    page = 16 * 2 * 8 * 256 * 2
    blocks = 10 * GiB // page // 21
    assert gemma2.capacity.num_blocks == blocks and gemma2.capacity.tokens == blocks // 2 * 16


def test_float32_checkpoint_is_served_in_bfloat16_by_default() -> None:
    gemma2 = size_model(arch("gemma-2-9b"), Setup())
    assert gemma2.weights.model_dtype == "bfloat16" and any("float32" in n for n in gemma2.notes)
    assert size_model(arch("gemma-2-9b"), Setup(dtype="float32")).weights_bytes == 2 * gemma2.weights_bytes


@pytest.mark.parametrize(("text", "expected"), [
    ("1G", 1 << 30), ("32M", 32 << 20), ("1g", 10**9), ("24GiB", 24 << 30), ("1.5 GB", 1_500_000_000), ("1073741824", 1 << 30),
])  # fmt: skip
def test_byte_sizes_read_as_vllm_reads_kv_cache_memory_bytes(text: str, expected: int) -> None:
    assert parse_bytes(text) == expected


def test_a_card_budget_is_utilisation_minus_weights_and_unknown_cards_say_which_are_known() -> None:
    budget = budget_from_card(gpu_memory("h100-80gb"), 0.9, 10 * GiB)
    assert budget.kv_memory_bytes == int(81559 * (1 << 20) * 0.9) - 10 * GiB and budget.upper_bound
    with pytest.raises(ValueError, match="A100-40GB"):
        gpu_memory("B300")


# --------------------------------------------------------------------------- against real logs


def realvllm_facts(scenario: str):
    return derive_log_facts(load_path(ROOT / "fixtures" / "bundles" / f"realvllm-{scenario}.json.gz"))


@pytest.mark.parametrize(("scenario", "budget", "tokens", "concurrency"), [
    ("healthy", "1G", 131_072, "128.00x"), ("kv-pressure", "32M", 4_096, "4.00x"),
])  # fmt: skip
def test_tiny_model_capacity_equals_the_real_vllm_032_log_to_the_token(scenario: str, budget: str, tokens: int, concurrency: str) -> None:
    facts = realvllm_facts(scenario)
    assert (facts.value("kv_cache_tokens"), f"{facts.value('max_concurrency'):.2f}x") == (tokens, concurrency)  # the log's lines
    sizing = size_model(arch("tiny-llama-realvllm"), Setup(device="cpu", max_model_len=1024), Budget(parse_bytes(budget), budget))
    assert (sizing.capacity.tokens, sizing.capacity.max_concurrency_text) == (tokens, concurrency)
    assert compare_with_log(arch("tiny-llama-realvllm"), facts).agrees


def test_block_override_capacity_equals_the_real_log() -> None:
    evidence, _ = read_log(str(ROOT / "fixtures" / "logs" / "startup-0.32.0-cpu-num-gpu-blocks-override-32.log"))
    facts = parse_lines(evidence.matched)
    sizing = size_model(arch("tiny-llama-realvllm"), Setup(device="cpu", max_model_len=2048, num_gpu_blocks_override=32))
    assert (sizing.capacity.tokens, sizing.capacity.max_concurrency_text) == (facts.value("kv_cache_tokens"), "2.00x")


def test_qwen3_14b_capacity_lands_inside_what_a_rounded_gib_allows() -> None:
    evidence, _ = read_log(str(ROOT / "fixtures" / "logs" / "v0.10.2-lmcache1739-qwen3-14b-enginecore-dp0-kv.log"))
    cmp = compare_with_log(arch("qwen3-14b"), parse_lines(evidence.matched))
    assert cmp.expected_tokens[0] <= 42_656 <= cmp.expected_tokens[1] and cmp.expected_tokens[1] - cmp.expected_tokens[0] < 100
    assert cmp.agrees and f"{cmp.expected_concurrency:.2f}" == "1.30"


def test_a_config_that_is_not_the_served_model_is_explained_by_one_setting() -> None:
    cmp = compare_with_log(arch("tiny-llama-realvllm", num_key_value_heads=8), realvllm_facts("healthy"))
    assert not cmp.agrees and cmp.expected_tokens == (65_536, 65_536)
    assert {(a.setting, a.value) for a in cmp.alternatives} == {("kv_cache_dtype", "fp8"), ("tensor_parallel_size", "2")}


def test_a_log_without_kv_lines_is_not_comparable() -> None:
    with pytest.raises(NotComparable, match="KV cache size"):
        compare_with_log(arch("llama-3-8b"), parse_lines([]))


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(("content", "message"), [
    (None, "no model config"), ("{not json", "not JSON"), ("[1, 2]", "not a JSON object"), ('{"hidden_size": 8}', "num_hidden_layers"),
])  # fmt: skip
def test_a_bad_config_is_a_fatal_evidence_error_with_the_reason(tmp_path: Path, content: str | None, message: str) -> None:
    if content is not None:
        (tmp_path / "config.json").write_text(content)
    evidence, errors = read_model_config(str(tmp_path))
    assert evidence is None and errors[0].fatal and message in errors[0].message
    if content is not None:
        with pytest.raises(ConfigError, match=message):
            parse_architecture(content)


@pytest.mark.parametrize(("name", "key", "value", "message"), [
    ("llama-3-8b", "num_hidden_layers", "1000000", "num_hidden_layers"),  # one entry per layer, once built unbounded
    ("llama-3-8b", "head_dim", "9" * 4400, "too large"),  # beyond Python's digit limit: int() raised ValueError
    ("llama-3-8b", "num_key_value_heads", "1e400", "out of range"),  # inf: int() raised OverflowError
    ("llama-3-8b", "num_key_value_heads", "1e30", "num_key_value_heads"),
    ("llama-3-8b", "intermediate_size", '"wide"', "intermediate_size"),
    ("mixtral-8x7b-v0.1", "num_local_experts", "-8", "num_local_experts"),
    ("deepseek-v3", "first_k_dense_replace", '"three"', "first_k_dense_replace"),
    ("deepseek-v3", "kv_lora_rank", "1e300", "kv_lora_rank"),
    ("qwen3-14b", "max_position_embeddings", str(2**70), "max_position_embeddings"),
])  # fmt: skip
def test_every_number_of_a_config_is_bounded_before_it_is_used(name: str, key: str, value: str, message: str) -> None:
    """Numbers read from a config.json are outside input like a log's or a scrape's: one bounded
    ``ConfigError`` naming the key (or the number the JSON reader refused), never a traceback or a
    machine spent on layers."""
    raw = json.loads((CONFIGS / name / "config.json").read_text())
    text = json.dumps({**raw, key: "@"}).replace('"@"', value)
    with pytest.raises(ConfigError, match=message):
        parse_architecture(text, name)


#: The shared logs' own tiny-llama (not the stage's model; its config is not kept): 2,048 KV bytes per
#: token, as its override log shows (6.33 GiB made 25,930 blocks of 128 tokens, 262,144 bytes each).
SHARED_TINY = {"model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4,
               "num_key_value_heads": 2, "intermediate_size": 512, "max_position_embeddings": 8192, "torch_dtype": "bfloat16"}


def test_the_shared_real_logs_agree_with_a_model_of_their_kv_bytes_per_token() -> None:
    shared = parse_architecture(json.dumps(SHARED_TINY))
    assert kv_layout(shared, model_dtype="bfloat16").bytes_per_token == 2048
    evidence, _ = read_log(str(ROOT / "fixtures" / "logs" / "startup-0.32.0-cpu-default.log"))
    cmp = compare_with_log(shared, parse_lines(evidence.matched))
    assert cmp.agrees and cmp.reported_tokens == 4_361_088 and f"{cmp.expected_concurrency:.2f}" == "532.36"


def test_the_longest_request_is_vllm_032s_estimated_maximum_model_length() -> None:
    evidence, _ = read_log(str(ROOT / "fixtures" / "logs" / "startup-0.32.0-cpu-FAILED-kv-too-small-for-max-model-len.log"))
    facts = parse_lines(evidence.matched)
    assert (facts.value("kv_cache_memory_bytes"), facts.value("estimated_max_model_len")) == (8 << 20, 3968)
    sizing = size_model(parse_architecture(json.dumps(SHARED_TINY)), Setup(device="cpu", max_model_len=8192), Budget(8 << 20, "8M"))
    # 32 blocks of 128, one kept back as the null block: 31 x 128
    assert (sizing.capacity.num_blocks, sizing.capacity.longest_request) == (32, 3968)


def test_weights_and_a_card_budget_against_a_real_vllm_memory_profile() -> None:
    """vLLM 0.6.5 serving Meta-Llama-3-8B on an H100 (fixtures/logs, PR #10511): weights 14.96 GiB at TP 1,
    7.48 GiB at TP 2; 53.29 GiB left for the KV cache after 1.79 GiB non-torch and 1.26 GiB activations."""
    llama = arch("llama-3-8b")
    assert [round(size_model(llama, Setup(tp=tp)).weights_bytes_per_rank / GiB, 2) for tp in (1, 2)] == [14.96, 7.48]
    card = size_model(llama, Setup(), budget_from_card(gpu_memory("H100-80GB"), 0.9, size_model(llama, Setup()).weights_bytes))
    over = card.budget.kv_memory_bytes / GiB - 53.29
    assert 1.79 + 1.26 <= over < 1.79 + 1.26 + 0.5  # the left-out parts, plus NVML's total above the CUDA runtime's


def test_fp8_says_what_it_buys_on_a_card() -> None:
    llama = arch("llama-3-8b")
    setup = Setup(max_model_len=8192)
    sizing = size_model(llama, setup, budget_from_card(gpu_memory("L4"), 0.9, size_model(llama, setup).weights_bytes), avg_tokens=2000)
    doc = summary(sizing)
    assert doc["with_fp8"]["kv_cache_tokens"] > 4 * doc["kv_cache_tokens"]  # half the weights leave more room, at half the bytes
    assert "evaluation" in doc["with_fp8"]["caveat"]
