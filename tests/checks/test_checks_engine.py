"""Direct tests of the engine-side checks (LD1xx, LD2xx) and of what their fixtures cannot pin.

The fixture test (tests/checks/test_checks.py) pins each case's outcome and setting; these tests pin
the numbers and sentences of a remediation, and run the recorded real-vLLM bundles.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from checks.error_rate import error_rate
from checks.kv_capacity_short import kv_capacity_short
from checks.kv_pressure_preemption import kv_pressure_preemption
from checks.prefill_bound_first_token import prefill_bound_first_token
from checks.requests_queued_before_prefill import requests_queued_before_prefill
from checks.speculative_decoding_loss import _per_position_acceptance, speculative_decoding_loss
from doctor.bundle import from_dict, load_path
from doctor.checking.contract import Fire, NotApplicable, Pass
from doctor.checking.registry import load_registry
from doctor.checking.runner import run_check
from doctor.derive import Evidence
from doctor.derive.log_facts import Fact, LogFacts
from doctor.derive.metrics_window import GaugeWindow, HistogramWindow, MetricsWindow
from doctor.derive.stream_stats import derive_stream_stats
from doctor.derive.user_felt import UserFelt
from doctor.evidence import Bundle, GpuDevice, GpuEvidence
from doctor.model import Finding, Outcome
from tests.support.bundles import bundle, metrics, request, stream
from tests.support.make_check_fixtures_engine import steady
from tests.support.make_check_fixtures_general import probe

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "fixtures" / "checks"


def case(path: str) -> Bundle:
    return from_dict(json.loads((CHECKS / path).read_text())["bundle"], path)


def finding(name: str, b: Bundle) -> Finding:
    spec = load_registry(plugins=False).find(name)
    assert spec is not None
    result = run_check(spec, Evidence(b), {})
    assert result.outcome is Outcome.FINDING, result.message
    assert result.finding is not None
    return result.finding


def facts(**values: object) -> LogFacts:
    return LogFacts(source="vllm.log", facts={k: Fact(v, line=i + 1) for i, (k, v) in enumerate(values.items())})


def gauge(*values: float) -> GaugeWindow:
    """A gauge scraped before, during (``values``) and after the probe, idle at both ends."""
    samples = [[-0.1, 0.0], *([float(i + 1), v] for i, v in enumerate(values)), [30.0, 0.0]]
    return GaugeWindow(min=0.0, max=max(values, default=0.0), last=0.0, samples=samples)


def queued(*, running: GaugeWindow | None, waiting: GaugeWindow | None, kv: float = 0.3) -> MetricsWindow:
    """82 % of the server's TTFT spent queueing, with the given gauges."""
    return MetricsWindow(
        queue=HistogramWindow(count=16, sum=31.5, mean=1.97, metric="vllm:request_queue_time_seconds"),
        ttft=HistogramWindow(count=16, sum=38.4, mean=2.4, metric="vllm:time_to_first_token_seconds"),
        running=running, waiting=waiting, kv_usage=GaugeWindow(min=0.0, max=kv, last=0.0),
    )


# --------------------------------------------------------------------------- LD101


def test_queue_with_the_batch_below_its_limit_passes():
    """12 waited while 8 of max_num_seqs 32 ran and KV stayed at 30 %: neither limit held them."""
    out = requests_queued_before_prefill(queued(running=gauge(8), waiting=gauge(12)), log_facts=facts(max_num_seqs=32))
    assert isinstance(out, Pass)
    assert "running up to 8 < max_num_seqs 32" in out.message
    assert "neither the batch limit nor the KV cache was full" in out.message


def test_queue_behind_a_full_batch_suggests_the_peak_demand_above_today():
    out = requests_queued_before_prefill(queued(running=gauge(8), waiting=gauge(12)), log_facts=facts(max_num_seqs=8))
    assert isinstance(out, Fire)
    fix = out.remediation
    assert (fix.setting, fix.current) == ("max_num_seqs", "8")
    # 8 x 0.9 / 0.3 = 24 fit by KV usage; the peak demand 8 + 12 = 20 is below it
    assert fix.suggested.startswith("20 (the peak of 20 requests in flight")
    assert "the batch is full" in fix.why


def test_queue_with_a_full_kv_cache_and_room_in_the_batch_adds_capacity():
    out = requests_queued_before_prefill(queued(running=gauge(5), waiting=gauge(9), kv=0.97),
                                         log_facts=facts(max_num_seqs=8))
    assert isinstance(out, Fire) and out.remediation.setting == "replicas"


def test_queue_seen_only_before_and_after_the_probe_does_not_claim_a_full_batch():
    """With no scrape during the probe, the batch was never seen: the advice says it is unconfirmed."""
    idle = GaugeWindow(min=0.0, max=0.0, last=0.0, samples=[[-0.1, 0.0], [30.0, 0.0]])
    out = requests_queued_before_prefill(queued(running=idle, waiting=idle), log_facts=facts(max_num_seqs=8))
    assert isinstance(out, Fire)
    assert "waiting up to" not in out.summary and "running" not in out.summary
    assert "the batch is full" not in out.remediation.why
    assert "not confirmed" in out.remediation.why
    assert out.remediation.current == "8"


def test_without_scrapes_during_the_probe_its_concurrency_caps_the_suggestion():
    idle = GaugeWindow(min=0.0, max=0.0, last=0.0, samples=[[-0.1, 0.0], [30.0, 0.0]])
    probe16 = stream(steady(4, ttft=2.4, gap=0.03), concurrency=16)
    out = requests_queued_before_prefill(queued(running=idle, waiting=idle), stream=probe16,
                                         log_facts=facts(max_num_seqs=8))
    assert isinstance(out, Fire)
    # KV usage 30 % at 8 would fit 8 x 0.9 / 0.3 = 24; the probe offered 16 at most
    assert out.remediation.suggested.startswith("16 (the probe's concurrency of 16")


def test_no_request_seen_waiting_during_the_probe_passes():
    out = requests_queued_before_prefill(queued(running=gauge(8), waiting=gauge(0, 0)), log_facts=facts(max_num_seqs=8))
    assert isinstance(out, Pass) and "no request was seen waiting" in out.message


def gpu_default() -> LogFacts:
    """A V1 engine on a GPU whose non-default args do not name max_num_seqs: only a lower bound is known."""
    return facts(engine_generation="V1", kv_cache_device="GPU", non_default_args={"model": "m"})


def test_running_above_a_lower_bound_default_does_not_claim_a_full_batch():
    """vLLM's GPU default 256 is a lower bound (1024 on >= 70 GiB cards): 300 running shows only that."""
    out = requests_queued_before_prefill(queued(running=gauge(300), waiting=gauge(12)), log_facts=gpu_default(),
                                         stream=stream(steady(4, ttft=2.4, gap=0.03), concurrency=312))
    assert isinstance(out, Fire)
    assert "running = max_num_seqs" not in out.summary and "the max_num_seqs in use is unknown" in out.summary
    fix = out.remediation
    assert fix.current == "at least 256 (vLLM's default for this GPU class)"
    assert fix.suggested.startswith("raise it above the limit in use")  # no number that could lower a 1024 limit
    assert "not confirmed" in fix.why


def test_running_below_a_lower_bound_default_is_below_the_limit():
    out = requests_queued_before_prefill(queued(running=gauge(100), waiting=gauge(12)), log_facts=gpu_default())
    assert isinstance(out, Pass) and "running up to 100 < max_num_seqs 256" in out.message


def test_recorded_queueing_bundle_still_raises_max_num_seqs():
    """Real vLLM 0.32 with --max-num-seqs 1: 7 waited behind the one running request."""
    f = finding("requests-queued-before-prefill", load_path(ROOT / "fixtures" / "bundles" / "realvllm-queueing.json.gz"))
    assert f.remediation.setting == "max_num_seqs" and f.remediation.current == "1"
    assert int(f.remediation.suggested.split()[0]) > 1


# --------------------------------------------------------------------------- LD102


def test_prefix_cache_hits_count_as_a_shared_prefix():
    mw = MetricsWindow(prefill=HistogramWindow(count=8, sum=8.8, mean=1.1, metric="vllm:request_prefill_time_seconds"),
                       ttft=HistogramWindow(count=8, sum=9.6, mean=1.2, metric="vllm:time_to_first_token_seconds"),
                       prompt_tokens=31200, finished_by_reason={"length": 8})
    off = facts(enable_prefix_caching=False)
    assert prefill_bound_first_token(mw, log_facts=off).remediation.setting == "tensor_parallel_size"
    mw.prefix_cache_hits = 2048.0
    out = prefill_bound_first_token(mw, log_facts=off)
    assert isinstance(out, Fire) and out.remediation.setting == "enable_prefix_caching"
    assert "2,048 prompt tokens" in out.remediation.why


# --------------------------------------------------------------------------- LD104


def test_new_connection_per_request_names_keepalive_off():
    f = finding("slow-transport", case("slow-transport/fires-new-connection-each-request.json"))
    assert (f.remediation.setting, f.remediation.current) == ("http_keepalive", "off")


# --------------------------------------------------------------------------- LD201


def test_recorded_kv_pressure_names_the_default_max_num_seqs_and_the_waiting_queue():
    """Real vLLM 0.32 on CPU without --max-num-seqs: the V1 default 128 is the value in use."""
    f = finding("kv-pressure-preemption", load_path(ROOT / "fixtures" / "bundles" / "realvllm-kv-pressure.json.gz"))
    fix = f.remediation
    assert (fix.setting, fix.current) == ("max_num_seqs", "128")
    assert int(fix.suggested.split()[0]) < 128
    waiting = {e.name: e.value for e in f.evidence}.get("waiting max during the stalls")
    assert waiting is not None and waiting > 0
    assert "waiting during the stalls" in f.summary


def test_lower_bound_default_is_not_quoted_as_the_max_num_seqs_to_lower():
    """Without free GPU memory LD201 lowers max_num_seqs: with only a lower bound (256) known and 300
    seen running, a fit of 280 is below the limit in use whatever it is, and 256 is not today's value."""
    mw = MetricsWindow(preemptions=3.0, kv_usage=GaugeWindow(min=0.0, max=0.99, last=0.0), running=gauge(300))
    full = GpuEvidence(available=True, devices=[GpuDevice(index=0, memory_total_bytes=80 * 2**30,
                                                          memory_free_bytes=2**30)])
    log_facts = gpu_default()
    log_facts.facts["kv_cache_tokens"] = Fact(280 * 262, line=3)  # 262 tokens a request (usage trailers)
    out = kv_pressure_preemption(mw, stream=stream(steady(4, ttft=0.2, gap=0.03)), log_facts=log_facts, gpu=full)
    assert isinstance(out, Fire)
    fix = out.remediation
    assert fix.setting == "max_num_seqs" and fix.current == "at least 256 (vLLM's default for this GPU class)"
    assert fix.suggested.startswith("280 ")


def test_prometheus_history_waiting_is_not_matched_to_stall_times():
    """Prometheus sample times count from the start of its range, not the probe's clock: no stall match."""
    stalled = [request("direct", i, ttft=0.2, gaps=[0.03] * 10 + [3.0] + [0.03] * 10, start=0.0) for i in range(4)]
    probe4 = stream(stalled, concurrency=4)
    # A waiting spike at t=1 (inside the probe's stall at ~0.5-3.5 s) and the peak elsewhere.
    waiting = GaugeWindow(min=0.0, max=9.0, last=0.0, samples=[[0.0, 0.0], [1.0, 2.0], [20.0, 9.0], [40.0, 0.0]])
    mw = MetricsWindow(preemptions=3.0, kv_usage=GaugeWindow(min=0.0, max=0.99, last=0.0), waiting=waiting)
    stats = derive_stream_stats(Bundle(stream=probe4))
    scraped = kv_pressure_preemption(mw, stream_stats=stats, stream=probe4)
    assert isinstance(scraped, Fire) and "up to 2 waiting during the stalls" in scraped.summary
    mw.source = "prometheus"
    history = kv_pressure_preemption(mw, stream_stats=stats, stream=probe4)
    assert isinstance(history, Fire) and "during the stalls" not in history.summary
    assert "up to 9 waiting during the Prometheus window" in history.summary


def test_kv_sized_in_bytes_says_which_lever_grows_the_cache():
    fix = finding("kv-pressure-preemption", case("kv-pressure-preemption/fires-kv-sized-in-bytes.json")).remediation
    assert "gpu_memory_utilization does not change" in fix.why
    assert "Raising kv_cache_memory_bytes instead grows the cache" in fix.why
    assert "cannot grow" not in fix.why


# --------------------------------------------------------------------------- LD501


def test_cancelled_requests_and_their_aborts_are_not_failures():
    before = {"vllm:request_success_total": {"stop": 0, "length": 0, "error": 0, "abort": 0}}
    after = {"vllm:request_success_total": {"stop": 36, "length": 0, "error": 0, "abort": 4}}
    b = bundle(stream=probe(cancelled=4), metrics=metrics(("before", -0.1, before), ("after", 30.0, after)))
    spec = load_registry(plugins=False).find("error-rate")
    assert spec is not None
    result = run_check(spec, Evidence(b), {})
    assert result.outcome is Outcome.PASS
    assert "0 of 4 probe requests failed" in result.message and "of 36 finished" in result.message
    # a real failure among them still counts, over the completed requests only
    failing = probe(failed=2, cancelled=4)
    out = error_rate(bundle(stream=failing))
    assert isinstance(out, Fire) and "2 of 4 probe requests failed" in out.summary
    assert isinstance(error_rate(bundle(stream=probe(cancelled=8))), NotApplicable)


# --------------------------------------------------------------------------- LD401

def test_kv_capacity_with_only_a_lower_bound_default_does_not_claim_a_full_batch_fits():
    """The cache holds 300 full-length requests, more than the 256 floor but not the 1024 an 80 GiB
    card gets: whether a full batch fits is unknown, so it neither passes nor fires."""
    log_facts = gpu_default()
    log_facts.facts["kv_cache_tokens"] = Fact(300 * 1024, line=3)
    log_facts.facts["max_model_len"] = Fact(1024, line=4)
    out = kv_capacity_short(log_facts)
    assert isinstance(out, NotApplicable) and "at least 256" in out.message


def test_kv_capacity_below_the_lower_bound_fires_without_quoting_it_as_today():
    log_facts = gpu_default()
    log_facts.facts["kv_cache_tokens"] = Fact(100 * 1024, line=3)
    log_facts.facts["max_model_len"] = Fact(1024, line=4)
    out = kv_capacity_short(log_facts)
    assert isinstance(out, Fire)
    assert out.remediation.current == "at least 256 (vLLM's default for this GPU class)"
    assert out.remediation.suggested == "100"


# -- LD209 speculative-decoding-loss ------------------------------------------------------------

SPEC_LOGS = Path(__file__).resolve().parents[2] / "fixtures" / "spec-decode"


def test_one_rate_per_position_matches_vllms_own_per_position_rates():
    """The real ngram run of vllm-project/vllm PR #24127 printed the window's rate (262 of 295 draft
    tokens, k 5) and each position's: the model's a^j lies within what vLLM measured."""
    line = (SPEC_LOGS / "v0.10.2dev-pr24127-ngram-k5-specdecoding-metrics.log").read_text()
    per_position = [float(x) for x in line.rsplit("Per-position acceptance rate: ", 1)[1].split(", ")]
    a = _per_position_acceptance(262 / 295, 5)
    assert sum(a**j for j in range(1, 6)) / 5 == pytest.approx(262 / 295)
    assert all(min(per_position) <= a**j <= max(per_position) for j in range(1, 6))


def test_speculative_suggestion_keeps_the_positions_that_pay():
    window = MetricsWindow(spec_draft_tokens=10_000.0, spec_accepted_tokens=3_500.0, spec_drafts=2_000.0)
    felt = Evidence(bundle(stream=stream(steady(6, ttft=0.2, gap=0.07, tokens=20)))).get("user_felt")
    out = speculative_decoding_loss(window, felt)
    assert isinstance(out, Fire) and out.remediation is not None
    assert (out.remediation.current, out.remediation.suggested.split()[0]) == ("5", "1")  # k from 10,000 / 2,000
    # a stricter bar for a position turns drafting off
    strict = speculative_decoding_loss(window, felt, min_position_acceptance=0.9)
    assert isinstance(strict, Fire) and strict.remediation is not None
    assert strict.remediation.suggested.startswith("off")
    # the same counters within budget are no loss
    assert isinstance(speculative_decoding_loss(window, felt, tpot_target_s=0.1), Pass)


def test_speculative_decoding_configured_but_not_counted_says_so():
    lf = LogFacts(source="vllm.log", facts={"num_speculative_tokens": Fact(4, line=3)})
    out = speculative_decoding_loss(MetricsWindow(), UserFelt(), lf)
    assert isinstance(out, NotApplicable) and "configured" in out.message
