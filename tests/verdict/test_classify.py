"""The classifier on whole bundles: every check runs (as ``llm-doctor analyze`` runs them), then
the verdict is asserted: symptom, primary remediation, decomposition, what is missing.

Bundles are the synthetic ones of ``tests.support.make_check_fixtures_engine`` (exact numbers)
and the real vLLM 0.32 / nginx traces; ``test_lab_*`` drive the embedded lab through the CLI.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from doctor.bundle import from_dict, load_path
from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.derive import Evidence
from doctor.evidence import Bundle, RequestTrace
from doctor.model import (
    Budgets,
    CheckResult,
    EvidenceValue,
    Finding,
    Outcome,
    Remediation,
    Severity,
    Symptom,
    SymptomClass,
)
from doctor.verdict import classify
from tests.support import nginx_traces
from tests.support.bundles import bundle, request, stream
from tests.support.make_check_fixtures_engine import (
    RAMP,
    gpu,
    h100,
    hist,
    load_scrapes,
    long_context,
    simulate,
    steady,
    vllm_log,
    xid_watch,
)

REGISTRY = load_registry(plugins=False)
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checks"
SSE = {"content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"}


def diagnose(b: Bundle, budgets: Budgets | None = None):
    return analyze(b, AnalyzeOptions(budgets=budgets or Budgets()), registry=REGISTRY)


def fixture(check: str, case: str) -> Bundle:
    path = FIXTURES / check / f"{case}.json"
    return from_dict(json.loads(path.read_text())["bundle"], str(path))


def two_paths(direct_ttft: float, gateway_ttft: float, *, gap: float = 0.028, tokens: int = 12) -> list[RequestTrace]:
    """Six requests per path (the first a warm-up), sequential, uvicorn direct and nginx in front."""
    reqs: list[RequestTrace] = []
    for path, base, ttft, server in (("direct", 0.0, direct_ttft, "uvicorn"), ("gateway", 50.0, gateway_ttft, "nginx")):
        for i in range(6):
            r = request(path, len(reqs), ttft=ttft + 0.002 * i, gaps=[gap] * (tokens - 1), start=base + i * 3.0,
                        headers={**SSE, "server": server}, warmup=i == 0)
            r.prompt_tokens = 256
            reqs.append(r)
    return reqs


def calm_metrics():
    return load_scrapes(
        {},
        {"vllm:num_requests_running": 1, "vllm:num_requests_waiting": 0, "vllm:kv_cache_usage_perc": 0.05,
         "vllm:num_preemptions_total": 0},
        {"vllm:request_queue_time_seconds": hist(0.002, 12), "vllm:request_prefill_time_seconds": hist(0.09, 12),
         "vllm:time_to_first_token_seconds": hist(0.1, 12), "vllm:num_preemptions_total": 0,
         "vllm:request_success_total": {"length": 12}, "vllm:prompt_tokens_total": 3072},
    )


def healthy_bundle() -> Bundle:
    return bundle(stream=stream(two_paths(0.12, 0.125)), metrics=calm_metrics(),
                  log=vllm_log({"max_num_seqs": 64}, kv_tokens=131072), gpu=gpu(h100()))


# --------------------------------------------------------------------------- healthy / inconclusive


def test_healthy_run_is_healthy_with_no_warning() -> None:
    report = diagnose(healthy_bundle())
    v = report.verdict
    assert v.symptom is Symptom.HEALTHY, v.summary
    assert [f.code for f in report.findings if f.severity.rank >= Severity.WARNING.rank] == []
    assert v.primary_remediation is None and v.primary_code is None
    assert "n=5" in v.summary and "within" in v.summary
    assert not v.client_suspect


def test_no_witness_at_all_is_inconclusive_and_names_the_probe() -> None:
    v = diagnose(bundle(log=vllm_log({"max_num_seqs": 64}, kv_tokens=131072))).verdict
    assert v.symptom is Symptom.INCONCLUSIVE
    assert v.missing and "stream probe" in v.missing[0]


def test_without_a_probe_the_servers_histograms_are_the_witness() -> None:
    """No request of ours, but the server timed 12 of its users' requests: enough to speak."""
    v = diagnose(bundle(metrics=calm_metrics())).verdict
    assert v.symptom is Symptom.HEALTHY, v.summary
    assert "server's histograms" in v.summary and "n=12" in v.summary


def test_every_request_failed_is_inconclusive() -> None:
    failed = [request("direct", i, ttft=0.1, gaps=[], start=i, outcome="http-status") for i in range(4)]
    v = diagnose(bundle(stream=stream(failed))).verdict
    assert v.symptom is Symptom.INCONCLUSIVE
    assert "failed" in v.summary and any("4 of 4 requests failed" in line for line in v.reasoning)
    assert v.missing


def test_gateway_only_over_budget_without_engine_evidence_is_inconclusive() -> None:
    slow = steady(6, ttft=1.4, gap=0.03, path="gateway")
    v = diagnose(bundle(stream=stream(slow))).verdict
    assert v.symptom is Symptom.INCONCLUSIVE, v.summary
    assert any("direct path" in m for m in v.missing)
    assert any("/metrics" in m for m in v.missing)


def test_client_suspect_is_said_in_the_summary() -> None:
    b = healthy_bundle()
    assert b.stream is not None
    b.stream.client.suspect = True
    b.stream.client.reasons = ["event-loop lag p99 80.0 ms > 10 ms: token stamps may be late"]
    v = diagnose(b).verdict
    assert v.client_suspect
    assert v.symptom is Symptom.HEALTHY
    assert "client may have distorted" in v.summary and "80.0 ms" in v.summary


# --------------------------------------------------------------------------- pre-first-token


def test_queueing_is_pre_first_token_and_raises_max_num_seqs() -> None:
    v = diagnose(fixture("requests-queued-before-prefill", "fires-full-batch-kv-headroom")).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert v.primary_code == "LD101"
    assert v.primary_remediation is not None and v.primary_remediation.setting == "max_num_seqs"
    assert v.primary_remediation.current == "8"
    queue = next(c for c in v.decomposition.ttft_components if c.name == "queue")
    assert queue.share == pytest.approx(1.97 / 2.4, abs=0.01)
    assert max(v.decomposition.ttft_components, key=lambda c: c.seconds or 0) is queue
    assert sum(c.share or 0 for c in v.decomposition.ttft_components) == pytest.approx(1.0)
    assert "82 %" in v.summary and "n=4" in v.summary
    chain = " | ".join(v.reasoning)
    assert "running = max_num_seqs = 8" in chain and "KV usage <= 31 %" in chain and "4.8x" in chain


def test_kv_full_queueing_names_capacity() -> None:
    v = diagnose(fixture("requests-queued-before-prefill", "fires-kv-full-needs-capacity")).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN
    assert v.primary_remediation is not None and v.primary_remediation.setting == "replicas"


def test_prefill_bound_prompts_name_prefix_caching() -> None:
    v = diagnose(fixture("prefill-bound-first-token", "fires-prefix-caching-off")).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN
    assert v.primary_code == "LD102"
    assert v.primary_remediation is not None and v.primary_remediation.setting == "enable_prefix_caching"


def test_budget_ratio_not_answer_length_decides_the_symptom() -> None:
    """TTFT at 3x its budget outweighs TPOT at 1.2x, although 200 tokens x 10 ms over is more seconds."""
    reqs = [request("direct", i, ttft=1.5, gaps=[0.06] * 199, start=i * 20.0) for i in range(5)]
    v = diagnose(bundle(stream=stream(reqs))).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.reasoning
    assert any("3.0x its budget" in line and "1.2x its budget" in line for line in v.reasoning)


# --------------------------------------------------------------------------- inter-token


def test_preemption_is_inter_token_and_sized_from_kv_capacity() -> None:
    v = diagnose(fixture("kv-pressure-preemption", "fires-preempted-no-gpu-headroom")).verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert v.primary_code == "LD201"
    assert v.primary_remediation is not None and v.primary_remediation.setting == "max_num_seqs"
    assert v.primary_remediation.suggested.startswith("13 ")
    names = [c.name for c in v.decomposition.itl_components]
    assert "preemption-stalls" in names
    assert "preemption stalls" in v.summary


def test_preemption_with_gpu_headroom_raises_utilisation() -> None:
    v = diagnose(fixture("kv-pressure-preemption", "fires-preempted-gpu-headroom")).verdict
    assert v.symptom is Symptom.INTER_TOKEN
    assert v.primary_remediation is not None and v.primary_remediation.setting == "gpu_memory_utilization"
    assert v.primary_remediation.current == "0.60"


def test_a_freeze_mid_answer_is_inter_token_even_with_tpot_in_budget() -> None:
    """One 3 s stall in 200 tokens adds 15 ms to TPOT (in budget); a reader still waits 3 s."""
    reqs = []
    for i in range(4):
        stall = [3.0] if i % 2 == 0 else [0.03]
        reqs.append(request("direct", i, ttft=0.15, gaps=[0.03] * 100 + stall + [0.03] * 98, start=i * 0.1))
    preempted = load_scrapes({}, {"vllm:kv_cache_usage_perc": 0.98, "vllm:num_preemptions_total": 0},
                             {"vllm:num_preemptions_total": 2})
    report = diagnose(bundle(stream=long_context(reqs, 4), metrics=preempted))
    v = report.verdict
    direct = report.views["stream_stats"]["paths"]["direct"]
    assert direct["tpot"]["p90"] < 0.05 and direct["ttft"]["p90"] < 0.5
    assert v.symptom is Symptom.INTER_TOKEN, v.reasoning
    assert v.primary_code == "LD201"
    assert "freeze" in v.summary


def test_prefill_interference_lowers_the_step_budget() -> None:
    v = diagnose(fixture("prefill-interference", "fires-prefill-steps-stall-streams")).verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert v.primary_code == "LD202"
    assert v.primary_remediation is not None and v.primary_remediation.setting == "max_num_batched_tokens"
    assert v.primary_remediation.suggested == "2048"
    assert "prefill interference" in v.summary


def test_deep_batch_lowers_max_num_seqs() -> None:
    deep = simulate(RAMP, 24, lambda running, new: 0.01 + 0.02 * (running + new))
    v = diagnose(bundle(stream=stream(deep, concurrency=4), log=vllm_log({"max_num_seqs": 16}))).verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert v.primary_code == "LD203"
    assert v.primary_remediation is not None and v.primary_remediation.setting == "max_num_seqs"
    assert [c.name for c in v.decomposition.itl_components][-1] == "batch-depth"


# --------------------------------------------------------------------------- proxy-only


def test_proxy_only_when_direct_is_within_budget_real_nginx() -> None:
    """Real vLLM 0.32 behind nginx with a 16 KiB proxy buffer: direct 60-120 ms, gateway seconds."""
    v = diagnose(bundle(stream=nginx_traces.direct_vs("relay-16k", gateway_keep_tokens=120))).verdict
    assert v.symptom is Symptom.PROXY_ONLY, v.summary
    assert v.primary_code == "LD301"
    assert v.primary_remediation is not None and v.primary_remediation.setting == "proxy_buffering"
    gateway = next(c for c in v.decomposition.ttft_components if c.name == "gateway")
    assert (gateway.share or 0) > 0.9
    assert "vs direct" in v.summary


def test_real_direct_and_unbuffered_nginx_is_healthy() -> None:
    v = diagnose(bundle(stream=nginx_traces.direct_vs("buffering-off"))).verdict
    assert v.symptom is Symptom.HEALTHY, v.summary


# --------------------------------------------------------------------------- primary selection


def finding(code: str, cause: str, symptom: SymptomClass, severity: Severity, setting: str) -> CheckResult:
    f = Finding(code=code, name=code.lower(), title=code, severity=severity, symptom=symptom, summary=code,
                remediation=Remediation(setting=setting, suggested="x", why="y", verify="z"),
                evidence=[EvidenceValue("n", 1)], cause=cause)
    return CheckResult(code=code, name=f.name, outcome=Outcome.FINDING, symptom=symptom, finding=f)


def test_primary_is_the_finding_of_the_dominant_component_not_the_most_severe() -> None:
    evidence = Evidence(fixture("requests-queued-before-prefill", "fires-full-batch-kv-headroom"))
    results = [
        finding("LD102", "prefill", SymptomClass.PRE_FIRST_TOKEN, Severity.CRITICAL, "enable_prefix_caching"),
        finding("LD101", "queue", SymptomClass.PRE_FIRST_TOKEN, Severity.WARNING, "max_num_seqs"),
    ]
    v = classify(evidence, results, Budgets())
    assert v.primary_code == "LD101"


def test_primary_falls_back_to_the_most_severe_finding_of_the_symptom() -> None:
    evidence = Evidence(fixture("requests-queued-before-prefill", "fires-full-batch-kv-headroom"))
    results = [
        finding("LD104", "transport", SymptomClass.PRE_FIRST_TOKEN, Severity.WARNING, "region_placement"),
        finding("LD103", "cold-start", SymptomClass.PRE_FIRST_TOKEN, Severity.CRITICAL, "warmup"),
        finding("LD206", "gpu-state", SymptomClass.INTER_TOKEN, Severity.CRITICAL, "gpu_cooling"),
    ]
    v = classify(evidence, results, Budgets())
    assert v.symptom is Symptom.PRE_FIRST_TOKEN
    assert v.primary_code == "LD103"


def test_budgets_move_the_verdict() -> None:
    b = healthy_bundle()
    assert diagnose(b).verdict.symptom is Symptom.HEALTHY
    tight = diagnose(b, Budgets(ttft_s=0.05, tpot_s=0.05)).verdict
    assert tight.symptom is Symptom.PRE_FIRST_TOKEN, tight.summary
    assert tight.budgets == {"ttft_s": 0.05, "tpot_s": 0.05}


# --------------------------------------------------------------------------- the lab, end to end


@pytest.mark.slow
@pytest.mark.parametrize("name", ["queueing", "kv-pressure"])
def test_lab_scenario_verdict(name: str, lab_diagnoses) -> None:
    """The classifier on a real lab run: the session's one diagnosis of each scenario
    (``tests/support/lab_runs.py``), which the demo tests also read."""
    from doctor.lab.scenarios import get_scenario

    expect = get_scenario(name).expect
    verdict = lab_diagnoses(name).report["verdict"]
    assert verdict["symptom"] == expect.symptom, verdict["summary"]
    assert verdict["primary_remediation"]["setting"] == expect.setting, verdict["summary"]


# --------------------------------------------------------------------------- audit fixes (c81cc54)


def test_interrupted_run_is_not_every_request_failed() -> None:
    """Ctrl-C cancels the requests in flight: that is an interrupted run, not a failing service."""
    cancelled = [request("direct", i, ttft=0.1, gaps=[], start=i, outcome="cancelled") for i in range(3)]
    v = diagnose(bundle(stream=stream(cancelled))).verdict
    assert v.symptom is Symptom.INCONCLUSIVE
    assert "interrupted" in v.summary and "failed" not in v.summary, v.summary
    assert not any("requests failed" in line for line in v.reasoning)


def test_cancelled_requests_are_not_counted_as_failures() -> None:
    done = steady(4, ttft=0.1, gap=0.02)
    cancelled = [request("direct", 9, ttft=0.1, gaps=[], start=20.0, outcome="cancelled")]
    v = diagnose(bundle(stream=stream(done + cancelled))).verdict
    assert v.symptom is Symptom.HEALTHY, v.summary
    assert "failed" not in v.summary and any("1 request(s) cancelled" in line for line in v.reasoning)


def test_steady_decode_excess_names_a_decode_setting_not_a_prefill_one() -> None:
    """Eager mode (info) explains slow steady decode; chunked-prefill-config (warning) raises
    max_num_batched_tokens, which would only lengthen the steps that stall streams."""
    log = vllm_log({"enforce_eager": True, "enable_chunked_prefill": False, "max_num_batched_tokens": 2048,
                    "max_model_len": 8192})
    report = diagnose(bundle(stream=stream(steady(6, ttft=0.1, gap=0.09, tokens=12)), log=log))
    assert {"LD204", "LD402"} <= {f.code for f in report.findings}
    v = report.verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert [c.name for c in v.decomposition.itl_components][-1] == "decode"
    assert v.primary_code == "LD204" and v.primary_remediation is not None
    assert v.primary_remediation.setting == "enforce_eager"


def test_a_gpu_fault_is_listed_but_does_not_explain_slow_steady_decode() -> None:
    """An XID (LD508) explains failures and stalls, not the per-token speed: a critical one is a
    finding of its own, while the decomposition and the primary stay with what slows decoding."""
    faulty = gpu(h100())
    faulty.xid = xid_watch((79, 0, 1.0), watched=(0,))
    report = diagnose(bundle(stream=stream(steady(6, ttft=0.1, gap=0.09, tokens=12)),
                             log=vllm_log({"enforce_eager": True}), gpu=faulty))
    xid = next(f for f in report.findings if f.code == "LD508")
    assert xid.severity is Severity.CRITICAL and xid.remediation.setting == "gpu_hardware"
    v = report.verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert [c.name for c in v.decomposition.itl_components][-1] == "decode"
    assert v.primary_code == "LD204"


def test_a_gpu_fault_in_a_healthy_run_is_named_for_review() -> None:
    b = healthy_bundle()
    assert b.gpu is not None
    b.gpu.xid = xid_watch((94, 0, 1.0), watched=(0,))
    v = diagnose(b).verdict
    assert v.symptom is Symptom.HEALTHY and "LD508" in v.summary, v.summary


def queue_without_batch_limit() -> Bundle:
    """Requests wait 1.4 s on average in vLLM's queue (real histogram shape), users wait 2.6 s."""
    b = fixture("queue-latency", "fires-queue-p90-2.5s")
    b.stream = stream(steady(6, ttft=2.6, gap=0.03))
    return b


def test_queue_without_a_batch_limit_finding_falls_back_to_queue_load() -> None:
    """LD101 silent (the batch limit is not the cause): the queue checks still explain the queue."""
    report = analyze(queue_without_batch_limit(), AnalyzeOptions(ignore=["LD101"]), registry=REGISTRY)
    v = report.verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert max(v.decomposition.ttft_components, key=lambda c: c.seconds or 0).name == "queue"
    assert v.primary_code == "LD505", v.summary  # the warning, over LD504's info
    assert "no check explains it" not in v.summary


def test_a_batch_limit_finding_outranks_the_queue_load_fallback() -> None:
    """Even when less severe: LD101 names the engine setting, the fallback only says "add capacity"."""
    b = fixture("requests-queued-before-prefill", "fires-full-batch-kv-headroom")
    results = analyze(b, registry=REGISTRY).results
    ld101 = next(r.finding for r in results if r.code == "LD101")
    assert ld101 is not None and {"LD504", "LD505"} <= {r.code for r in results if r.finding is not None}
    ld101.severity = Severity.INFO
    v = classify(Evidence(b), results, Budgets())
    assert v.primary_code == "LD101"


def test_batch_depth_target_follows_the_tpot_budget() -> None:
    """LD203 once kept its own 50 ms target whatever --tpot-budget said."""
    deep = simulate(RAMP, 24, lambda running, new: 0.01 + 0.02 * (running + new))
    b = bundle(stream=stream(deep, concurrency=4), log=vllm_log({"max_num_seqs": 16}))

    def ld203(options: AnalyzeOptions):
        return next(r for r in analyze(b, options, registry=REGISTRY).results if r.code == "LD203")

    roomy = ld203(AnalyzeOptions(budgets=Budgets(tpot_s=0.2)))
    assert roomy.outcome is Outcome.PASS and "200 ms" in roomy.message
    looser = ld203(AnalyzeOptions(budgets=Budgets(tpot_s=0.08))).finding
    assert looser is not None and looser.remediation.suggested.startswith("3 (")
    assert "meets 80 ms" in looser.remediation.suggested
    pinned = ld203(AnalyzeOptions(budgets=Budgets(tpot_s=0.2), settings={"LD203": {"tpot_target_s": "0.05"}}))
    assert pinned.finding is not None and pinned.finding.remediation.suggested.startswith("2 (")


# --------------------------------------------------------------------------- compound incident


def warmup_behind_a_prefill() -> Bundle:
    """Issue 20's compound incident, offline: other users' 6,000-token prompts arrive while answers
    stream (``--max-num-batched-tokens 8192``). The probe's warm-up waited 11.3 s behind one of
    those prefills; its three measured streams (sent together) each waited 1.5 s for a first token
    and froze for 1 s twice, together, at no probe request's first token; /metrics counted 60,000
    prompt tokens against the probe's 400, and 30 requests finished before the probe's first."""
    warm = request("direct", 0, ttft=11.3, gaps=[0.03] * 10, start=0.0, warmup=True)
    measured = [request("direct", i + 1, ttft=1.5 + 0.01 * i, gaps=[1.0 if k in (20, 40) else 0.03 for k in range(60)],
                        start=12.0) for i in range(3)]
    for r in (warm, *measured):
        r.prompt_tokens = 100
    before = {"vllm:request_success_total": {"stop": 30}, "vllm:prompt_tokens_total": 0,
              "vllm:num_preemptions_total": 0}
    after = {"vllm:request_success_total": {"stop": 44}, "vllm:prompt_tokens_total": 60000,
             "vllm:num_preemptions_total": 0}
    return bundle(stream=stream([warm, *measured], concurrency=3),
                  metrics=load_scrapes(before, {}, after),
                  log=vllm_log({"max_num_batched_tokens": 8192}))


def test_a_warmup_behind_another_users_prefill_is_the_step_budget_not_a_cold_start() -> None:
    """The verdict used to be pre-first-token with LD103's `warmup`: the engine had served for
    minutes and was prefilling other prompts. LD103 stays quiet, LD202 fires, and the one knob of
    the compound incident is named with its direction and its cost."""
    report = diagnose(warmup_behind_a_prefill())
    v = report.verdict
    codes = {f.code for f in report.findings}
    assert "LD103" not in codes and "LD202" in codes, codes
    cold = next(r for r in report.results if r.code == "LD103")
    assert cold.outcome is Outcome.PASS and "other requests" in cold.message, cold.message
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert v.primary_remediation is not None and v.primary_remediation.setting == "max_num_batched_tokens", v.summary
    assert v.primary_code == "LD202"
    assert "one knob trades two symptoms" in v.summary and "lowering max_num_batched_tokens" in v.summary
    assert "costs the long prompts' own TTFT" in v.summary, v.summary


def test_an_inter_token_verdict_of_the_step_budget_says_what_lowering_it_costs() -> None:
    """The recorded real-vLLM incident stays inter-token with LD202's max_num_batched_tokens, and
    now says the trade: the first tokens were over budget too."""
    b = load_path(Path(__file__).resolve().parents[2] / "fixtures/bundles/realvllm-users-prefill-interference.json.gz")
    v = diagnose(b, Budgets(ttft_s=4.0, tpot_s=0.3)).verdict
    assert v.symptom is Symptom.INTER_TOKEN and v.primary_code == "LD202", v.summary
    assert "one knob trades two symptoms (LD202): lowering max_num_batched_tokens" in v.summary, v.summary


def test_a_prefill_finding_keeps_its_change_and_the_trade_is_said_the_other_way() -> None:
    """Beside a prefill finding (long prompts' own first token), LD202's knob would serve it raised,
    at everyone's freezes: the prefill finding's change stays, and the summary says the trade."""
    evidence = Evidence(fixture("requests-queued-before-prefill", "fires-full-batch-kv-headroom"))
    results = [
        finding("LD101", "queue", SymptomClass.PRE_FIRST_TOKEN, Severity.WARNING, "max_num_seqs"),
        finding("LD202", "prefill-interference", SymptomClass.INTER_TOKEN, Severity.WARNING, "max_num_batched_tokens"),
    ]
    v = classify(evidence, results, Budgets())
    assert v.symptom is Symptom.PRE_FIRST_TOKEN and v.primary_code == "LD101", v.summary
    assert "one knob trades two symptoms (LD202 beside LD101): raising max_num_batched_tokens" in v.summary


def test_a_risk_of_a_latency_class_never_makes_the_class_nor_wins_over_a_felt_finding() -> None:
    results = [finding("LD307", "buffering", SymptomClass.PROXY_ONLY, Severity.CRITICAL, "gateway_response_start")]
    results[0].finding.felt = False
    v = classify(Evidence(healthy_bundle()), results, Budgets())
    assert v.symptom is Symptom.HEALTHY and "1 risk, not felt yet: LD307" in v.summary, v.summary
    evidence = Evidence(fixture("requests-queued-before-prefill", "fires-full-batch-kv-headroom"))
    results = [finding("LD103", "cold-start", SymptomClass.PRE_FIRST_TOKEN, Severity.CRITICAL, "warmup"),
               finding("LD104", "transport", SymptomClass.PRE_FIRST_TOKEN, Severity.WARNING, "region_placement")]
    results[0].finding.felt = False
    assert classify(evidence, results, Budgets()).primary_code == "LD104"  # felt first, then the most severe
