"""Direct tests of the capacity / configuration checks (LD401-LD405) on hand-built log facts."""

from __future__ import annotations

from checks.chunked_prefill_config import chunked_prefill_config
from checks.fp8_lever import fp8_lever
from checks.gpu_memory_headroom import gpu_memory_headroom
from checks.kv_capacity_short import kv_capacity_short
from checks.startup_error import startup_error
from checks.tp_without_nvlink import devices_in_use, tp_without_nvlink
from doctor.checking.contract import Fire, NotApplicable, Pass
from doctor.derive import Evidence
from doctor.derive.log_facts import Fact, LogFacts, Startup, StartupError
from doctor.evidence import Endpoint, EndpointsEvidence, ModelInfo, RunRecord
from doctor.sizing.budget import smallest_card
from tests.support import make_check_fixtures_sizing as sizing_fixtures
from tests.support.bundles import bundle
from tests.support.make_check_fixtures_capacity import device, gpu, llama3_8b_h100_log, probe


def facts(**values: object) -> LogFacts:
    return LogFacts(
        source="vllm.log", facts={k: Fact(v, line=i + 1) for i, (k, v) in enumerate(values.items())}
    )


def test_kv_capacity_arithmetic_and_suggestion():
    lf = facts(kv_cache_tokens=4096, max_model_len=1024, max_num_seqs=8)
    out = kv_capacity_short(lf, stream=probe(512, 256))
    assert isinstance(out, Fire)
    assert (
        "4,096 tokens vs max_num_seqs 8 x max_model_len 1,024 = 8,192 tokens: 4.0 full-length" in out.summary
    )
    # 4096 x 0.9 / 768 = 4.8 -> 4; 5.3 requests of 768 tokens fit, fewer than 8: preemption ahead
    assert (out.remediation.suggested, out.remediation.current, out.severity.value) == ("4", "8", "warning")


def test_kv_capacity_falls_back_to_the_logged_concurrency_and_v1_models():
    lf = facts(max_concurrency=2.5, max_concurrency_tokens=2048, max_num_seqs=16)
    out = kv_capacity_short(lf)
    assert isinstance(out, Fire) and "Maximum concurrency 2.50x for 2048" in out.summary
    endpoints = EndpointsEvidence(
        [Endpoint(role="engine", url="u", models=[ModelInfo(id="m", max_model_len=2048)])]
    )
    out = kv_capacity_short(facts(kv_cache_tokens=8192, max_num_seqs=16), endpoints)
    assert isinstance(out, Fire) and "max_model_len 2,048" in out.summary


def test_kv_capacity_quiet_when_the_served_requests_fit():
    lf = facts(kv_cache_tokens=100_000, max_model_len=32_768, max_num_seqs=8)
    out = kv_capacity_short(lf, stream=probe(256, 64))
    assert isinstance(out, Pass)


def test_kv_capacity_reads_max_num_seqs_from_the_run_record():
    lf = facts(kv_cache_tokens=4096, max_model_len=1024)
    assert isinstance(kv_capacity_short(lf), NotApplicable)
    assert isinstance(kv_capacity_short(lf, run=RunRecord(engine_config={"max_num_seqs": 8})), Fire)


def test_chunked_prefill_flag_spellings():
    for off in (False, "False", "0", "off"):
        out = chunked_prefill_config(
            facts(chunked_prefill=off, max_num_batched_tokens=512, max_model_len=4096)
        )
        assert isinstance(out, Fire) and out.remediation.suggested == "4096"
    assert isinstance(
        chunked_prefill_config(facts(chunked_prefill="True", max_num_batched_tokens=512, max_model_len=4096)),
        Pass,
    )


def test_startup_error_from_an_earlier_startup_is_history():
    lf = facts(kv_cache_tokens=1000)
    lf.errors = [StartupError("no-cache-memory", "No available memory for the cache blocks.", line=5)]
    lf.startups = [Startup(first_line=1, last_line=9, errors=["no-cache-memory"]), Startup(first_line=10)]
    out = startup_error(lf)
    assert isinstance(out, Pass) and "line 5" in out.message


def test_startup_error_other_after_a_completed_startup_is_not_a_startup_failure():
    lf = facts(kv_cache_tokens=1000)
    lf.errors = [StartupError("other", "EngineDeadError: EngineCore encountered an issue.", line=365)]
    lf.startups = [Startup(first_line=1, last_line=405)]
    assert isinstance(startup_error(lf), Pass)
    lf.facts.pop("kv_cache_tokens")
    out = startup_error(lf)
    assert isinstance(out, Fire) and out.remediation.setting == "vllm_serve_args"


def test_startup_error_fixes_follow_the_kind():
    oom = facts(gpu_memory_utilization=0.95)
    oom.errors = [StartupError("oom", "torch.OutOfMemoryError: CUDA out of memory.", line=40)]
    out = startup_error(oom)
    assert isinstance(out, Fire)
    assert (out.remediation.setting, out.remediation.suggested, out.remediation.current) == (
        "gpu_memory_utilization",
        "0.90",
        "0.95",
    )
    cpu = facts(kv_cache_device="CPU")
    cpu.errors = [
        StartupError(
            "no-cache-memory",
            "No available memory for the cache blocks. Try increasing "
            "`VLLM_CPU_KVCACHE_SPACE` when initializing the engine.",
            line=3,
        )
    ]
    out = startup_error(cpu)
    assert isinstance(out, Fire) and out.remediation.setting == "VLLM_CPU_KVCACHE_SPACE"
    v0 = facts(max_model_len=32768)
    v0.errors = [
        StartupError(
            "max-len-exceeds-kv",
            "ValueError: The model's max seq len (32768) is larger than "
            "the maximum number of tokens that can be stored in KV cache (20000).",
            line=7,
        )
    ]
    out = startup_error(v0)
    assert isinstance(out, Fire) and (out.remediation.suggested, out.remediation.current) == (
        "20000",
        "32768",
    )


def test_tp_devices_follow_cuda_visible_devices():
    g = gpu(
        device(0), device(1), device(2), device(3), topology={"2-3": "NVLINK", "0-1": "SYS"}, visible="2,3"
    )
    assert devices_in_use(g, 2) == [2, 3]
    assert isinstance(tp_without_nvlink(g, facts(tensor_parallel_size=2)), Pass)
    g.cuda_visible_devices = None
    out = tp_without_nvlink(g, facts(tensor_parallel_size=2))
    assert isinstance(out, Fire) and "0-1 SYS" in out.summary


def test_tp_interconnect_from_the_run_record():
    g = gpu(device(0), device(1))
    assert isinstance(tp_without_nvlink(g, facts(tensor_parallel_size=2)), NotApplicable)
    run = RunRecord(gpu_interconnect="pcie")
    assert isinstance(tp_without_nvlink(g, facts(tensor_parallel_size=2), run), Fire)


def test_headroom_suggestion_without_a_known_utilisation():
    out = gpu_memory_headroom(gpu(device(0, free_gib=1.0), device(1, free_gib=9.0)))
    assert isinstance(out, Fire)
    assert "GPU 0" in out.summary and out.remediation.suggested == "lower by 0.02"
    assert out.severity.value == "warning"
    assert isinstance(gpu_memory_headroom(gpu(device(0, free_gib=1.0)), min_free_share=0.01), Pass)


def _llama3_8b_sizing(**log_args: object):
    b = bundle(log=llama3_8b_h100_log(**log_args), model_config=sizing_fixtures.config("llama-3-8b"))
    ev = Evidence(b)
    return ev.get("sizing"), ev.get("log_facts")


def test_fp8_lever_names_a_smaller_card_only_when_the_card_is_known():
    sizing, lf = _llama3_8b_sizing()
    with_card = fp8_lever(sizing, gpu(device(0)), lf)
    without = fp8_lever(sizing, None, lf)
    assert isinstance(with_card, Fire) and isinstance(without, Fire)
    assert "L40S" in with_card.summary and "L40S" not in without.summary
    # fp8 weights give ~6.5 GiB back to a profiled cache, on top of halving the bytes per token
    assert without.summary.count("2.2x") == 1
    # a bar above the gain still fires for the smaller card, and passes without one
    assert isinstance(fp8_lever(sizing, gpu(device(0)), lf, min_gain=3.0), Fire)
    assert isinstance(fp8_lever(sizing, None, lf, min_gain=3.0), Pass)


def test_fp8_lever_with_an_fp8_checkpoint_offers_only_the_kv_cache():
    b = bundle(log=llama3_8b_h100_log(), model_config=sizing_fixtures.config(
        "llama-3-8b", quantization_config={"quant_method": "fp8", "activation_scheme": "dynamic"}))
    ev = Evidence(b)
    out = fp8_lever(ev.get("sizing"), None, ev.get("log_facts"))
    assert isinstance(out, Fire) and out.remediation is not None
    assert (out.remediation.setting, out.remediation.suggested, out.remediation.current) == ("kv_cache_dtype", "fp8", "auto")


def test_smallest_card_is_the_least_memory_that_holds_the_need_below_the_current_card():
    assert smallest_card(38.5 * 2**30, 0.95, below_bytes=80 * 2**30)[0] == "L40S"
    assert smallest_card(20 * 2**30, 0.9, below_bytes=80 * 2**30)[0] == "A10G"
    assert smallest_card(20 * 2**30, 0.9, below_bytes=20 * 2**30) is None


def test_gpu_memory_headroom_prices_the_lower_setting_in_kv_tokens():
    sizing, lf = _llama3_8b_sizing()
    out = gpu_memory_headroom(gpu(device(0, free_gib=0.4)), lf, None, sizing)
    bare = gpu_memory_headroom(gpu(device(0, free_gib=0.4)), lf, None, None)
    assert isinstance(out, Fire) and isinstance(bare, Fire) and out.remediation and bare.remediation
    assert out.remediation.suggested == bare.remediation.suggested == "0.92"
    # 0.03 of 79.6 GiB = 2.39 GiB at 131,072 bytes per token (32 layers x 8 KV heads x 128 x 2 x 2 bytes)
    assert "19,563 of its 497,488 tokens" in out.remediation.why
    assert "some KV cache" in bare.remediation.why
