"""The real-vLLM scenarios: how each server is started, how it is probed, what the verdict must be.

One table serves the live stage (``tests/realvllm/test_*.py``, marker ``realvllm``) and the
offline replay of the bundles it recorded (``tests/test_scenarios_recorded.py``), so the replay
analyses each bundle with the budgets the live run used and expects the same answer.

Budgets are set here for CPU speed (this ~72 M-parameter random Llama decoded at ~16 ms per
token, TPOT p50, in the recorded healthy run on a 2-core CI machine): the defaults (0.5 s, 50 ms)
are GPU-interactive targets and stay untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "fixtures" / "bundles"

#: The KV cache of the servers that are not meant to run short: 1 GiB = 131,072 tokens of this
#: model (8 layers x 4 KV heads x 64 dims x 2 (K and V) x 2 bytes = 8 KiB per token), which
#: holds the default 128 sequences of max_model_len 1024 (no kv-capacity-short).
ROOMY_KV = ["--kv-cache-memory-bytes", "1G"]


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
    notes: list[str] = field(default_factory=list)

    def budget_args(self) -> list[str]:
        return ["--ttft-budget", str(self.ttft_budget_s), "--tpot-budget", str(self.tpot_budget_s)]

    @property
    def recorded(self) -> Path:
        return RECORDED / f"realvllm-{self.name}.json.gz"


#: The engine runs on the CPU: NVML (when a GPU happens to be there) would describe another device.
_SHORT = ["--route", "chat", "--no-gpu"]

SCENARIOS = {
    s.name: s
    for s in (
        Scenario(
            name="healthy",
            engine_args=ROOMY_KV,
            probe_args=[*_SHORT, "--prompt-tokens", "64", "--max-tokens", "32", "--concurrency", "1", "--requests", "8"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="healthy", setting=None,
        ),
        Scenario(
            name="proxy-buffering",
            engine_args=ROOMY_KV,
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
            engine_args=[*ROOMY_KV, "--max-num-seqs", "1"],
            probe_args=[*_SHORT, "--prompt-tokens", "64", "--max-tokens", "32", "--concurrency", "8", "--requests", "16"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="pre-first-token", setting="max_num_seqs", finding="LD101",
        ),
        Scenario(
            name="kv-pressure",
            # 32 MiB = 4,096 tokens: 8 streams of 64 + 512 tokens need 40 blocks of 128, there are 32.
            engine_args=["--kv-cache-memory-bytes", "32M"],
            probe_args=[*_SHORT, "--prompt-tokens", "64", "--max-tokens", "512", "--concurrency", "8", "--requests", "8",
                        "--warmup", "0"],
            ttft_budget_s=1.0, tpot_budget_s=0.2,
            symptom="inter-token", setting="max_num_seqs", finding="LD201",
        ),
    )
}
