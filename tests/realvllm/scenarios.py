"""The real-vLLM scenarios: how each server is started, how it is probed, what the verdict must be.

One table serves the live stage (``tests/realvllm/test_*.py``, marker ``realvllm``) and the
offline replay of the bundles it recorded (``tests/verdict/test_scenarios_recorded.py``), so the replay
analyses each bundle with the budgets the live run used and expects the same answer.

Budgets are set here for CPU speed (this ~72 M-parameter random Llama decoded at ~16 ms per
token, TPOT p50, in the recorded healthy run on a 2-core CI machine): the defaults (0.5 s, 50 ms)
are GPU-interactive targets and stay untouched.

The ``users-*`` and ``history-*`` scenarios are incidents as they happen in production: the load
comes from other users (``tests/support/loadgen.py``, a process of its own), and llm-doctor runs
beside it with its default probe. They run the model in float32: on a CPU without AVX-512 the
bf16 matmuls fall back to a slow path (prefill ~17 ms per token against ~3 ms in float32), which
would bury every incident under seconds of idle prefill. Their budgets allow for 2 shared cores
(idle TTFT of the default 256-token prompt 0.9-3 s, TPOT 75-110 ms there); each incident is made
several times larger than that.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from tests.realvllm.load import Load

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "fixtures" / "bundles"

#: Every engine of the stage: float32 (see above; CI's machine is AVX2-only too), whose KV token takes
#: 16 KiB (8 layers x 4 KV heads x 64 dims x 2 (K and V) x 4 bytes), so 2 GiB = 131,072 tokens is the
#: roomy cache that holds the default 128 sequences of max_model_len 1024 (no kv-capacity-short);
#: ``-O0`` skips torch.compile, which took ~2 of the ~3.5 minutes of start-up on 2 shared cores (it
#: keeps ``enforce_eager`` off, so the eager-mode check stays out of the incidents' verdicts).
FP32 = ["--dtype", "float32", "-O0"]
ROOMY_KV_FP32 = ["--kv-cache-memory-bytes", "2G"]


@dataclass(frozen=True)
class Scenario:
    name: str
    engine_args: list[str]  # vllm serve flags beyond --max-model-len 1024 --served-model-name tiny
    probe_args: list[str]  # llm-doctor diagnose flags beyond the targets, --log, budgets and outputs
    ttft_budget_s: float
    tpot_budget_s: float
    symptom: str  # the verdict's symptom
    setting: str | None  # the primary remediation's setting (None: no remediation, healthy)
    finding: str | None = None  # a finding code the verdict must list
    via_gateway: bool = False  # probe through a real nginx as well as directly
    load: Load | None = None  # other users' load, from a process of its own, while llm-doctor runs
    history: bool = False  # after the load: Prometheus history only (--prometheus, no probe, no log)
    notes: list[str] = field(default_factory=list)

    def budget_args(self) -> list[str]:
        return ["--ttft-budget", str(self.ttft_budget_s), "--tpot-budget", str(self.tpot_budget_s)]

    @property
    def recorded(self) -> Path:
        return RECORDED / f"realvllm-{self.name}.json.gz"


#: The engine runs on the CPU: NVML (when a GPU happens to be there) would describe another device.
_SHORT = ["--route", "chat", "--no-gpu"]
#: What an on-call engineer types during an incident: no probe shape, the probe's defaults.
_DEFAULT_PROBE = _SHORT
_HISTORY = ["--no-gpu", "--since", "4m"]

#: An application's chat request with a JSON-schema response_format (``fixtures/payloads/``): an enum
#: of 10,000 product codes and a note. xgrammar 0.2.8 compiled that schema in ~1.9 s on this
#: machine with a 290-token vocabulary (4,000 codes: 0.14 s; 8,000: 0.22 s; the cost jumps between
#: 8,000 and 10,000), and caches it: the first request per schema pays, the repeats do not.
STRUCTURED_PAYLOAD = ROOT / "fixtures" / "payloads" / "sku-catalogue-schema.json"

#: Twelve users in closed loops on two sequence slots: each waits for ~6 others' short answers.
QUEUEING_LOAD = Load(users=12, prompt_tokens=64, max_tokens=8, ready={"vllm:num_requests_waiting": 6})
#: Six users' 384-token answers (~100-token prompts) need 6 x 4 blocks of 128 tokens; the cache has 16
#: (2,048 tokens), so running streams are preempted as they grow.
KV_LOAD = Load(users=6, prompt_tokens=64, max_tokens=384, ready={"vllm:num_requests_running": 4})

SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            name="healthy",
            engine_args=[*FP32, *ROOMY_KV_FP32],
            probe_args=[*_SHORT, "--prompt-tokens", "64", "--max-tokens", "32", "--concurrency", "1", "--requests", "8"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="healthy", setting=None,
        ),
        Scenario(
            name="proxy-buffering",
            engine_args=[*FP32, *ROOMY_KV_FP32],
            # nginx's 4 KiB buffer holds ~12 chat events of this model, so the gateway's first token
            # comes ~12 decode steps (~0.2-0.35 s) after the direct one (~0.1 s with a short
            # prompt): the TTFT budget sits between the two. 48 tokens fill the buffer ~3 times.
            probe_args=[*_SHORT, "--prompt-tokens", "16", "--max-tokens", "48", "--concurrency", "1", "--requests", "6"],
            ttft_budget_s=0.2, tpot_budget_s=0.2,
            symptom="proxy-only", setting="proxy_buffering", finding="LD301",
            via_gateway=True,
        ),
        Scenario(
            name="queueing",
            engine_args=[*FP32, *ROOMY_KV_FP32, "--max-num-seqs", "1"],
            probe_args=[*_SHORT, "--prompt-tokens", "64", "--max-tokens", "32", "--concurrency", "8", "--requests", "16"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="pre-first-token", setting="max_num_seqs", finding="LD101",
        ),
        Scenario(
            name="kv-pressure",
            # 32 MiB = 4,096 tokens: 8 streams of 64 + 512 tokens need 40 blocks of 128, there are 32.
            engine_args=[*FP32, "--kv-cache-memory-bytes", "64M"],  # 4,096 float32 tokens
            probe_args=[*_SHORT, "--prompt-tokens", "64", "--max-tokens", "512", "--concurrency", "8", "--requests", "8",
                        "--warmup", "0"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="inter-token", setting="max_num_seqs", finding="LD201",
        ),
        Scenario(
            name="structured-output",
            engine_args=[*FP32, *ROOMY_KV_FP32],  # the healthy engine's flags: it shares that server
            probe_args=[*_SHORT, "--payload", str(STRUCTURED_PAYLOAD), "--concurrency", "1", "--requests", "6"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="pre-first-token", setting="structured_outputs_config", finding="LD108",
        ),
        Scenario(
            name="users-healthy",
            engine_args=[*FP32, *ROOMY_KV_FP32],
            probe_args=_DEFAULT_PROBE,
            ttft_budget_s=4.0, tpot_budget_s=0.3,
            symptom="healthy", setting=None,
            load=Load(users=2, prompt_tokens=64, max_tokens=64, ready={"vllm:num_requests_running": 1}),
        ),
        Scenario(
            name="users-queueing",
            engine_args=[*FP32, *ROOMY_KV_FP32, "--max-num-seqs", "2"],
            probe_args=_DEFAULT_PROBE,
            ttft_budget_s=4.0, tpot_budget_s=0.3,
            symptom="pre-first-token", setting="max_num_seqs", finding="LD101",
            load=QUEUEING_LOAD,
        ),
        Scenario(
            name="history-queueing",
            engine_args=[*FP32, *ROOMY_KV_FP32, "--max-num-seqs", "2"],
            probe_args=_HISTORY,
            ttft_budget_s=4.0, tpot_budget_s=0.3,
            symptom="pre-first-token", setting="max_num_seqs", finding="LD101",
            load=QUEUEING_LOAD, history=True,
        ),
        Scenario(
            name="users-kv-pressure",
            engine_args=[*FP32, "--kv-cache-memory-bytes", "32M"],
            probe_args=_DEFAULT_PROBE,
            ttft_budget_s=4.0, tpot_budget_s=0.3,
            symptom="inter-token", setting="max_num_seqs", finding="LD201",
            load=KV_LOAD,
        ),
        Scenario(
            name="history-kv-pressure",
            engine_args=[*FP32, "--kv-cache-memory-bytes", "32M"],
            probe_args=_HISTORY,
            ttft_budget_s=4.0, tpot_budget_s=0.3,
            # No log and no NVML: LD201 cannot tell that the KV cache is sized in bytes on a CPU, and
            # gives vLLM's first advice (more memory for the cache), lowering max_num_seqs as fallback.
            symptom="inter-token", setting="gpu_memory_utilization", finding="LD201",
            load=KV_LOAD, history=True,
        ),
        Scenario(
            name="users-prefill-interference",
            # One user's ~1,800-token prompt every 3 s or so, computed in one step (the step budget is
            # larger than the prompt), while three users and the probe stream.
            engine_args=[*FP32, *ROOMY_KV_FP32, "--max-model-len", "2048", "--max-num-batched-tokens", "2048"],
            probe_args=_DEFAULT_PROBE,
            ttft_budget_s=4.0, tpot_budget_s=0.3,
            symptom="inter-token", setting="max_num_batched_tokens", finding="LD202",
            load=Load(users=3, prompt_tokens=64, max_tokens=128, also=("1:1800:1:long:2",),
                      ready={"vllm:num_requests_running": 3}),
        ),
        # LoRA adapters taking turns in one slot (--max-loras 1): four users stream from adapter
        # alpha, the probe asks for beta, whose requests wait for the slot with batch seats free.
        # vLLM v1 lists no adapter as waiting (doctor/engine_readers/vllm_lora.py): LD109 reads the turns.
        # The probe's first tokens wait out alpha's answers (~3.5-4 s here, ~0.3 s alone): a 2 s budget.
        Scenario(
            name="users-lora",
            engine_args=[*FP32, *ROOMY_KV_FP32, "--enable-lora", "--max-loras", "1", "--max-lora-rank", "8",
                         "--max-cpu-loras", "2", "--lora-modules", "alpha={model_dir}/lora/alpha",
                         "beta={model_dir}/lora/beta"],
            probe_args=[*_DEFAULT_PROBE, "--model", "beta"],
            ttft_budget_s=2.0, tpot_budget_s=0.3,
            symptom="pre-first-token", setting="max_loras", finding="LD109",
            load=Load(users=4, prompt_tokens=64, max_tokens=64, model="alpha", ready={"vllm:num_requests_running": 3}),
        ),
        # The healthy server with its engine-core process stopped (SIGSTOP): /health, /v1/models and
        # /metrics still answer 200, requests are accepted and get no token (vllm#39863). The
        # default probe; its watchdog must stop the run and name the wedge.
        Scenario(
            name="engine-wedged",
            engine_args=[*FP32, *ROOMY_KV_FP32],
            probe_args=_DEFAULT_PROBE,
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="pre-first-token", setting="restart_and_health_check", finding="LD105",
        ),
    )
}
