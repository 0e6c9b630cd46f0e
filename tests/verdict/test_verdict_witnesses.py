"""The verdict follows what users felt, from every witness, and never contradicts a finding.

Each test is one way the headline used to say HEALTHY (or inconclusive) during an incident: the
probe's few requests were the lucky ones, a request that never got its first token was dropped
as a failure, the gateway failed every request, a buffering gateway stayed within budget, or
only the server's histograms saw the incident. The last test holds the rule over every fixture.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from doctor.bundle import from_dict, load_path
from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.evidence import Bundle, RequestTrace
from doctor.model import Budgets, Severity, Symptom
from tests.support.bundles import ITL_BOUNDS, TTFT_BOUNDS, bundle, histogram, request, stream
from tests.support.make_check_fixtures_engine import window

REGISTRY = load_registry(plugins=False)
ROOT = Path(__file__).resolve().parents[2]
SSE = {"content-type": "text/event-stream; charset=utf-8", "transfer-encoding": "chunked"}
LATENCY_CLASSES = {"pre-first-token", "inter-token", "proxy-only"}



def diagnose(b: Bundle, budgets: Budgets | None = None):
    return analyze(b, AnalyzeOptions(budgets=budgets or Budgets()), registry=REGISTRY)


def zero(bounds: tuple[float, ...]) -> dict[str, object]:
    return histogram([], bounds)


def server_window(ttfts: list[float], queues: list[float], itls: list[float], *,
                  running: list[float], waiting: list[float], kv: float = 0.01, preemptions: int = 0):
    """Scrapes before, during (one per gauge sample) and after, as vLLM exposes every family."""
    families = {"vllm:time_to_first_token_seconds": TTFT_BOUNDS, "vllm:request_queue_time_seconds": TTFT_BOUNDS,
                "vllm:inter_token_latency_seconds": ITL_BOUNDS, "vllm:e2e_request_latency_seconds": TTFT_BOUNDS}
    before: dict[str, object] = {name: zero(b) for name, b in families.items()}
    before.update({"vllm:num_requests_running": 0, "vllm:num_requests_waiting": 0, "vllm:kv_cache_usage_perc": 0.0,
                   "vllm:num_preemptions_total": 0})
    during: list[Mapping[str, object]] = [
        {**before, "vllm:num_requests_running": r, "vllm:num_requests_waiting": w, "vllm:kv_cache_usage_perc": kv}
        for r, w in zip(running, waiting, strict=True)
    ]
    after = {
        **before,
        "vllm:time_to_first_token_seconds": histogram(ttfts, TTFT_BOUNDS),
        "vllm:request_queue_time_seconds": histogram(queues, TTFT_BOUNDS),
        "vllm:inter_token_latency_seconds": histogram(itls, ITL_BOUNDS),
        "vllm:e2e_request_latency_seconds": histogram([t + 1.0 for t in ttfts], TTFT_BOUNDS),
        "vllm:num_preemptions_total": preemptions,
    }
    return window(before, during, after, end=float(len(running) + 1))


def fast(path: str, n: int, *, start: float = 0.0, ttft: float = 0.08, **kw) -> list[RequestTrace]:
    return [request(path, i, ttft=ttft, gaps=[0.02] * 15, start=start + i * 1.0, headers={**SSE}, **kw) for i in range(n)]


def waited(path: str, index: int, *, start: float, waited_s: float = 30.0, warmup: bool = False) -> RequestTrace:
    """A request sent, answered with headers, then no token until the probe's stall timeout."""
    r = request(path, index, ttft=0.0, gaps=[], start=start, outcome="stall", warmup=warmup)
    r.status, r.t_headers = 200, start + 0.01
    r.t_failed = r.t_end = start + waited_s
    r.error = f"no byte for {waited_s:g} s inside the stream"
    return r


# --------------------------------------------------------------------------- censored requests


def test_a_request_still_waiting_at_the_stall_timeout_is_a_ttft_of_at_least_that_long() -> None:
    reqs = [*fast("direct", 4), waited("direct", 4, start=5.0), waited("direct", 5, start=6.0)]
    report = diagnose(bundle(stream=stream(reqs)))
    ps = report.views["stream_stats"]["paths"]["direct"]
    assert ps["ttft_censored"] == 2 and ps["ttft_felt"]["n"] == 6 and ps["ttft_felt"]["max"] >= 30.0
    assert ps["ttft"]["n"] == 4  # the answered ones: what compares with the server's own TTFT
    v = report.verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert "TTFT p90 >= " in v.summary and "still waiting" in v.summary
    assert any("counted in TTFT at that wait" in line for line in v.reasoning)


def cut(path: str, index: int, *, start: float, outcome: str, ttft: float = 1.5) -> RequestTrace:
    """An answer whose first token came after ``ttft``, cut mid-answer (the user's --deadline
    shorter than one answer, Ctrl-C, a connection cut): no end, no usage trailer."""
    r = request(path, index, ttft=ttft, gaps=[0.02] * 10, start=start, headers={**SSE})
    r.outcome, r.error, r.completion_tokens, r.finish_reason = outcome, f"synthetic {outcome}", None, None
    r.t_failed, r.t_end = r.t_end, None
    return r


@pytest.mark.parametrize("outcome", ["deadline", "cancelled", "cut", "client-stall"])
def test_an_answer_cut_mid_way_still_counts_its_measured_first_token_and_gaps(outcome: str) -> None:
    """Issue 22 item 5: with every answer cut after a 1.5 s first token, the report said that no
    latency was measured. Read from the token timestamps alone, whatever the outcome says."""
    report = diagnose(bundle(stream=stream([cut("direct", i, start=i * 5.0, outcome=outcome) for i in range(3)])))
    ps = report.views["stream_stats"]["paths"]["direct"]
    assert ps["partial"] == 3 and ps["n_ok"] == 0
    assert ps["ttft"]["n"] == ps["ttft_felt"]["n"] == 3 and ps["ttft_felt"]["p90"] == pytest.approx(1.5)
    assert ps["tpot"]["n"] == 3 and ps["max_gap"]["n"] == 3 and ps["itl"]["n"] == 30
    v = report.verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert "TTFT p90 1.50 s (n=3)" in v.summary


def test_a_cut_answer_beside_answered_ones_adds_its_time_and_a_warm_up_does_not() -> None:
    reqs = [*fast("direct", 4), cut("direct", 4, start=5.0, outcome="deadline", ttft=2.0),
            cut("direct", 5, start=9.0, outcome="deadline", ttft=9.0)]
    reqs[-1].warmup = True
    ps = diagnose(bundle(stream=stream(reqs))).views["stream_stats"]["paths"]["direct"]
    assert ps["partial"] == 1 and ps["ttft_felt"]["n"] == 5 and ps["ttft_felt"]["max"] == pytest.approx(2.0)
    assert ps["e2e"]["n"] == 4  # no end was seen: an answer's whole time is not measured


def test_a_warm_up_that_never_got_an_answer_is_the_incident_not_a_cold_start() -> None:
    reqs = [waited("direct", 0, start=0.0, warmup=True), *fast("direct", 4, start=31.0)]
    v = diagnose(bundle(stream=stream(reqs))).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert "1 still waiting" in v.summary


def test_a_slow_but_answered_warm_up_is_said_not_silently_dropped() -> None:
    reqs = fast("direct", 1, ttft=3.0, warmup=True) + fast("direct", 5, start=5.0)
    v = diagnose(bundle(stream=stream(reqs))).verdict
    assert any("warm-up TTFT 3.00 s" in line for line in v.reasoning), v.reasoning


# --------------------------------------------------------------------------- failing paths


@pytest.mark.parametrize("outcome", ["http-status", "connect", "cut"])
def test_a_gateway_that_fails_beside_a_working_engine_is_proxy_only(outcome: str) -> None:
    broken = [request("gateway", i, ttft=0.0, gaps=[], start=10.0 + i, outcome=outcome) for i in range(5)]
    for r in broken:
        r.status = 502 if outcome == "http-status" else None
    v = diagnose(bundle(stream=stream(fast("direct", 5) + broken))).verdict
    assert v.symptom is Symptom.PROXY_ONLY, v.summary
    assert "every one of 5 gateway requests failed" in v.summary and outcome in v.summary
    if outcome == "http-status":
        assert "HTTP 502" in v.summary
    assert v.primary_code is not None


def test_a_hung_gateway_is_proxy_only_by_its_censored_first_tokens() -> None:
    hung = [waited("gateway", i, start=10.0 + i) for i in range(4)]
    v = diagnose(bundle(stream=stream(fast("direct", 4) + hung))).verdict
    assert v.symptom is Symptom.PROXY_ONLY, v.summary


def test_a_mostly_failing_engine_is_never_healthy() -> None:
    broken = [request("direct", i, ttft=0.0, gaps=[], start=10.0 + i, outcome="http-status") for i in range(4)]
    v = diagnose(bundle(stream=stream(fast("direct", 2) + broken))).verdict
    assert v.symptom is not Symptom.HEALTHY, v.summary
    assert "4 of 6 direct requests failed" in v.summary


# --------------------------------------------------------------------------- stream shape


def test_bursts_the_engine_does_not_send_are_proxy_only_even_within_budget() -> None:
    direct = fast("direct", 5)
    gateway = [request("gateway", i, ttft=0.08, gaps=[0.02] * 47, start=20.0 + i * 2, headers={**SSE, "server": "nginx"},
                       burst_bytes=4096) for i in range(5)]
    v = diagnose(bundle(stream=stream(direct + gateway))).verdict
    assert v.symptom is Symptom.PROXY_ONLY, v.summary
    assert "within budget, but delivered in bursts of 22 tokens" in v.summary
    assert v.primary_remediation is not None and v.primary_remediation.setting == "proxy_buffering"


# --------------------------------------------------------------------------- the server's histograms


def queueing_window():
    """Twelve users' requests: TTFT 15-19 s, 99 % of it queue; running flat at 2 with a queue, KV 1 %."""
    ttfts = [15.0 + 0.4 * i for i in range(12)]
    return server_window(ttfts, [t * 0.99 for t in ttfts], [0.02] * 400,
                         running=[2, 2, 2, 2], waiting=[10, 9, 6, 3], kv=0.01)


def test_the_servers_histograms_see_the_incident_the_probe_missed() -> None:
    """The probe's requests came after the burst and were fast; every other user's were not."""
    v = diagnose(bundle(stream=stream(fast("direct", 5, start=20.0)), metrics=queueing_window())).verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert "server's histograms" in v.summary and "n=12" in v.summary
    assert "the probe's own direct requests" in v.summary  # kept beside the deciding witness
    assert v.primary_code == "LD101" and v.primary_remediation.setting == "max_num_seqs"


def test_a_window_without_a_probe_speaks_of_the_window() -> None:
    report = diagnose(bundle(metrics=queueing_window()))
    v = report.verdict
    assert v.symptom is Symptom.PRE_FIRST_TOKEN, v.summary
    assert "TTFT" in v.summary and "mean 17.2 s (n=12)" in v.summary
    assert v.decomposition.ttft_basis == "server TTFT mean"
    ld101 = next(f for f in report.findings if f.code == "LD101")
    queue_share = "99 %"
    assert f"is {queue_share} of TTFT" in ld101.summary and f"{queue_share} of the server's TTFT mean" in v.summary


def test_a_flat_running_gauge_with_a_queue_names_max_num_seqs_inferred() -> None:
    """No startup log: running stays at 2 in every scrape while requests wait and the KV cache is empty."""
    report = diagnose(bundle(metrics=queueing_window()))
    rem = report.verdict.primary_remediation
    assert rem is not None and rem.setting == "max_num_seqs"
    assert rem.current is not None and rem.current.startswith("2 (inferred: running flat at 2")


def test_answers_that_freeze_on_the_server_are_inter_token_though_the_probe_streamed_smoothly() -> None:
    itls = [0.02] * 300 + [1.2] * 6  # six one-second freezes across twelve answers
    mw = server_window([0.1] * 12, [0.001] * 12, itls, running=[6, 6, 6], waiting=[0, 0, 0], kv=0.3)
    v = diagnose(bundle(stream=stream(fast("direct", 5)), metrics=mw)).verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert "6 gaps over 1.00 s across 12 requests" in v.summary


def test_a_healthy_server_window_keeps_a_healthy_verdict() -> None:
    mw = server_window([0.09] * 12, [0.001] * 12, [0.02] * 300, running=[3, 2, 1], waiting=[0, 0, 0], kv=0.05)
    v = diagnose(bundle(stream=stream(fast("direct", 5)), metrics=mw)).verdict
    assert v.symptom is Symptom.HEALTHY, v.summary


def test_within_budget_ratios_are_never_printed_as_1x() -> None:
    mw = server_window([0.06] * 12, [0.001] * 12, [0.02] * 300, running=[1, 1, 1], waiting=[0, 0, 0])
    reqs = [request("direct", i, ttft=0.065, gaps=[0.3] * 15, start=i * 6.0, headers={**SSE}) for i in range(5)]
    v = diagnose(bundle(stream=stream(reqs), metrics=mw)).verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    decision = next(line for line in v.reasoning if "its budget" in line)
    assert "TTFT p90 is 0.13x its budget" in decision and "1.0x" not in decision


# --------------------------------------------------------------------------- the rule, over every fixture


def fixture_bundles() -> list[tuple[str, Bundle]]:
    out = []
    for path in sorted((ROOT / "fixtures" / "checks").glob("*/*.json")):
        out.append((f"{path.parent.name}/{path.stem}", from_dict(json.loads(path.read_text())["bundle"], str(path))))
    out += [(path.name, load_path(path)) for path in sorted((ROOT / "fixtures" / "bundles").glob("*.json.gz"))]
    return out


@pytest.mark.slow
def test_the_headline_is_felt_latency_and_only_that() -> None:
    """docs/verdict.md rule 3 over every fixture and recorded bundle, at two budgets: no healthy
    headline beside a felt latency finding (warning or above), and no unhealthy headline without
    a felt finding or a witness over budget (or a gateway's bursts, a stream shape users see).
    A risk (``felt=False``) is listed under a healthy headline and never makes its class."""
    offenders = []
    bundles = fixture_bundles()
    assert len(bundles) > 100
    risks_seen = 0
    for name, b in bundles:
        for budgets in (Budgets(), Budgets(ttft_s=5.0, tpot_s=1.0)):
            report = diagnose(b, budgets)
            v = report.verdict
            felt = [f.code for f in report.findings
                    if f.felt and f.severity.rank >= Severity.WARNING.rank and f.symptom.value in LATENCY_CLASSES]
            # failed requests are felt too (LD501, a general check): they may make an unhealthy class
            felt_any = [f.code for f in report.findings if f.felt and f.severity.rank >= Severity.WARNING.rank]
            risks = [f.code for f in report.findings if not f.felt and f.severity.rank >= Severity.WARNING.rank]
            if v.symptom is Symptom.HEALTHY and felt:
                offenders.append(f"{name} {budgets}: healthy beside felt {felt}")
            over = (any("(over)" in line or "answers freeze longer" in line for line in v.reasoning)
                    or "delivered in bursts" in v.summary)
            if v.symptom.value in LATENCY_CLASSES and not felt_any and not over:
                offenders.append(f"{name} {budgets}: {v.symptom.value} with no felt finding and no witness over "
                                 f"budget: {v.summary}")
            if v.symptom is Symptom.HEALTHY and risks:
                risks_seen += 1
                if f"risk{'s' if len(risks) > 1 else ''}" not in v.summary or risks[0] not in v.summary:
                    offenders.append(f"{name} {budgets}: healthy beside risks {risks} not named: {v.summary}")
    assert not offenders, "\n".join(offenders)
    assert risks_seen  # the fixtures hold risks (LD307 behind a stock nginx), so the rule is exercised


def test_a_bursting_gateway_over_budget_is_proxy_only_though_its_bursts_look_like_freezes() -> None:
    """A loaded engine (50 ms per token, a 2 s pause in every answer) behind a buffer of 22 events:
    both paths freeze, but the gateway's first token, 4.5x the direct one's, says what it adds."""
    gaps = [0.05] * 23 + [2.0] + [0.05] * 23
    direct = [request("direct", i, ttft=0.3, gaps=gaps, start=i * 5.0, headers={**SSE}) for i in range(5)]
    gateway = [request("gateway", i, ttft=0.3, gaps=gaps, start=40.0 + i * 5, headers={**SSE, "server": "nginx"},
                       burst_bytes=4096) for i in range(5)]
    v = diagnose(bundle(stream=stream(direct + gateway)), Budgets(ttft_s=0.2, tpot_s=0.2)).verdict
    assert v.symptom is Symptom.PROXY_ONLY, v.reasoning
    assert v.primary_remediation is not None and v.primary_remediation.setting == "proxy_buffering"


def test_a_freeze_of_the_client_itself_is_not_an_inter_token_incident():
    """CI, beside a busy CPU engine on 2 cores: the probe's event loop froze for 34 s inside one
    stream, whose largest gap read 34 s, while the server's histograms and the other users saw no
    freeze. Recorded as a client freeze, that gap is the client's, not the server's: the verdict
    stays with what the server did (healthy), and the reasoning says what was taken out."""
    b = load_path(ROOT / "fixtures/bundles/realvllm-users-healthy.json.gz")
    budgets = Budgets(ttft_s=4.0, tpot_s=0.3)
    assert diagnose(b, budgets).verdict.symptom is Symptom.HEALTHY
    assert b.stream is not None
    victim = next(r for r in b.stream.requests if r.ok and not r.warmup and len(r.tokens) > 10)
    middle = victim.tokens[5].t
    for token in victim.tokens[6:]:
        token.t += 34.0
    victim.t_end = (victim.t_end or victim.tokens[-1].t) + 34.0
    victim.t_last_token = victim.tokens[-1].t
    frozen = diagnose(b, budgets)
    assert frozen.verdict.symptom is Symptom.INTER_TOKEN  # the gap alone: what CI reported

    b.stream.client.freezes = [[middle + 0.01, victim.tokens[6].t]]
    result = diagnose(b, budgets)
    assert result.verdict.symptom is Symptom.HEALTHY, result.verdict.summary
    assert any("the client itself froze" in line for line in result.verdict.reasoning), result.verdict.reasoning


@pytest.mark.parametrize("name, setting", [("realvllm-ci-users-kv-pressure-requeued", "max_num_seqs"),
                                           ("realvllm-ci-history-kv-pressure-requeued", "gpu_memory_utilization")])
def test_preempted_requests_waiting_again_are_the_kv_cache_not_a_queue(name: str, setting: str):
    """A real KV incident (19 preemptions in 20 requests): the preempted requests went back to the
    queue, so TTFT went over budget while every witnessed gap stayed within. The queue is the KV
    cache's doing: inter-token, with LD201's KV setting, and the headline leads with the TTFT."""
    b = load_path(ROOT / "fixtures/bundles" / f"{name}.json.gz")
    result = diagnose(b, Budgets(ttft_s=4.0, tpot_s=0.3))
    v = result.verdict
    assert v.symptom is Symptom.INTER_TOKEN, v.summary
    assert v.primary_remediation is not None and v.primary_remediation.setting == setting, v.summary
    assert v.primary_code == "LD201" and "TTFT p90" in v.summary and "KV cache running out" in v.summary
