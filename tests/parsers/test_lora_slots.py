"""``vllm:lora_requests_info`` read as vLLM writes it: one series per label set, the current one the latest."""

from __future__ import annotations

from doctor.engine_readers.vllm_lora import LoraSlots, lora_slots
from doctor.evidence import Scrape

# vLLM 0.32 (v1/metrics/loggers.py): label sets stay until a restart, each valued with the time it was set.
TEXT = """# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",waiting_lora_adapters="c"} 1.7000000020e+09
vllm:lora_requests_info{max_lora="2",running_lora_adapters="",waiting_lora_adapters=""} 1.7000000010e+09
"""


def scrape(text: str, t: float = 1.0) -> Scrape:
    return Scrape(phase="during", t=t, wall=1_700_000_000.0 + t, status=200, text=text)


def test_the_current_state_is_the_latest_series() -> None:
    assert lora_slots([scrape(TEXT)]) == [LoraSlots(t=1.0, max_lora=2, running=("a", "b"), waiting=("c",))]


def test_only_an_adapter_outside_full_slots_is_shut_out() -> None:
    assert LoraSlots(0.0, 2, ("a", "b"), ("c", "a")).shut_out == ("c",)
    assert LoraSlots(0.0, 3, ("a", "b"), ("c",)).shut_out == ()  # a slot is free: it waits for a batch seat
    assert LoraSlots(0.0, None, ("a",), ("c",)).shut_out == ()


def test_scrapes_without_the_family_or_unparsable_are_skipped() -> None:
    assert lora_slots([scrape("vllm:num_requests_running 1\n"), scrape("vllm:lora_requests_info{ garbage")]) == []
