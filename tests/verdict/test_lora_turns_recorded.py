"""LoRA adapters taking turns in too few slots, as a real vLLM 0.32 showed it.

The real-vLLM stage's ``users-lora`` incident (``tests/realvllm/scenarios.py``): a real vLLM 0.32
(CPU build, ``--max-loras 1``) served four users on adapter ``alpha`` while ``llm-doctor diagnose
--model beta`` probed it. The probe's requests waited for the one slot with batch seats free, and
vLLM v1's ``vllm:lora_requests_info`` listed no adapter as waiting: LD109 must read the turns, and
the verdict must name ``max_loras``, not the queue's usual levers (``max_num_seqs``, replicas).
``tests/verdict/test_scenarios_recorded.py`` replays the verdict at the scenario's budgets; here,
what the family showed, and the same turns at a budget nobody exceeded.
"""

from __future__ import annotations

from pathlib import Path

from doctor.bundle import load_path
from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.engine_readers.vllm_lora import lora_slots, served
from doctor.model import Budgets, Symptom

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "fixtures" / "bundles" / "realvllm-users-lora.json.gz"
SCRAPE = ROOT / "fixtures" / "real-vllm" / "lora" / "0.32.0-cpu-two-adapters-one-slot.prom"
REGISTRY = load_registry()


def test_vllm_v1_lists_the_adapters_served_as_waiting_too() -> None:
    """Every scrape's waiting list is its running list: a request for another adapter is listed
    nowhere until it runs. What the family still tells is which adapters were served."""
    states = lora_slots(load_path(RECORDED).metrics.scrapes)
    assert len(states) > 5
    assert all(s.waiting == s.running for s in states)
    assert not any(s.shut_out for s in states)
    assert served(states) == ("alpha", "beta")
    assert {s.max_lora for s in states} == {1}
    assert "running_lora_adapters=\"alpha\",waiting_lora_adapters=\"alpha\"" in SCRAPE.read_text()


def test_adapters_taking_turns_in_one_slot_name_max_loras_not_the_batch() -> None:
    report = analyze(load_path(RECORDED), AnalyzeOptions(budgets=Budgets(ttft_s=2.0, tpot_s=0.3)), registry=REGISTRY)
    assert report.verdict.primary_code == "LD109", report.verdict.summary
    ld109 = next(r for r in report.results if r.code == "LD109")
    assert ld109.finding is not None and ld109.finding.felt
    assert "took turns in 1 slot" in ld109.finding.summary and "of 128 batch seats" in ld109.finding.summary
    ld101 = next(r for r in report.results if r.code == "LD101")
    assert ld101.finding is None, ld101.message  # not a full batch: the seats were free


def test_the_same_turns_within_the_first_token_budget_are_a_risk() -> None:
    """TTFT p90 4.14 s against a 6 s budget: nobody felt the wait, so no headline."""
    report = analyze(load_path(RECORDED), AnalyzeOptions(budgets=Budgets(ttft_s=6.0, tpot_s=0.3)), registry=REGISTRY)
    ld109 = next(r for r in report.results if r.code == "LD109")
    assert ld109.finding is not None and not ld109.finding.felt
    assert report.verdict.symptom is Symptom.HEALTHY, report.verdict.summary
