"""Window deltas from real and constructed /metrics scrapes, through the real derivation."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from doctor.derive import Evidence
from doctor.derive.missing import Missing
from doctor.engine_metrics.metric_names import ExpositionError, parse_exposition
from doctor.engine_metrics.readings import quantile_bounds, quantile_le
from doctor.evidence import Bundle, MetricsEvidence, Scrape
from tests.support.bundles import exposition

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "metrics"
TEXT = "text/plain; version=0.0.4; charset=utf-8"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def scrape(phase: str, t: float, text: str, **kw: object) -> Scrape:
    return Scrape(phase=phase, t=t, wall=1_800_000_000.0 + t, status=kw.pop("status", 200),
                  content_type=kw.pop("content_type", TEXT), text=text, **kw)


def window(*scrapes: Scrape):
    return Evidence(Bundle(metrics=MetricsEvidence(url="http://127.0.0.1:8000/metrics", scrapes=list(scrapes)))).get("metrics_window")


def real_run():
    return window(scrape("before", -0.2, fixture("0.32.0-cpu-idle.prom")),
                  scrape("after", 95.0, fixture("0.32.0-cpu-after-load.prom")))


def test_real_vllm_0_32_run_deltas_match_the_files():
    # Hand-computed from the two files: the idle scrape has every vllm: counter at 0.0, so each
    # delta is the after-load value (grep '^vllm:...' 0.32.0-cpu-after-load.prom).
    w = real_run()
    assert w.source == "scrape" and w.window_s == pytest.approx(95.2) and w.scrapes_used == 2
    assert w.preemptions == 0.0  # present and zero, not missing
    assert w.finished_by_reason == {"abort": 0.0, "error": 0.0, "length": 209.0, "repetition": 0.0, "stop": 0.0}
    assert w.prompt_tokens == 134844.0
    assert w.generation_tokens == 24981.0
    assert w.prefix_cache_hits == 0.0
    assert w.prefix_cache_queries == 134844.0
    expected = {  # field: (metric, _count, _sum)
        "ttft": ("vllm:time_to_first_token_seconds", 209.0, 96.02679800987244),
        "queue": ("vllm:request_queue_time_seconds", 209.0, 58.855669899000645),
        "prefill": ("vllm:request_prefill_time_seconds", 209.0, 23.28909740599886),
        "decode": ("vllm:request_decode_time_seconds", 209.0, 507.0603115489994),
        "itl": ("vllm:inter_token_latency_seconds", 24772.0, 507.0603115489994),
        "e2e": ("vllm:e2e_request_latency_seconds", 209.0, 602.8936007022858),
    }
    for field, (metric, count, total) in expected.items():
        h = getattr(w, field)
        assert (h.metric, h.count, h.sum) == (metric, count, total), field
        assert h.mean == pytest.approx(total / count), field
    # TTFT buckets: le=0.1 holds 38, le=0.25 holds 128 (>= 0.5*209), le=1.0 172 < 0.9*209 <= 209 at le=2.5.
    assert (w.ttft.p50_le, w.ttft.p90_le, w.ttft.p99_le) == (0.25, 2.5, 2.5)
    # ITL: 18480 >= 12386 at 0.025; 23263 >= 22294.8 at 0.05; 24229 < 24524.28 <= 24772 at 0.15.
    assert (w.itl.p50_le, w.itl.p90_le, w.itl.p99_le) == (0.025, 0.05, 0.15)
    assert w.kv_usage.samples == [[-0.2, 0.0], [95.0, 0.0]]
    assert (w.running.max, w.waiting.max) == (0.0, 0.0)
    assert w.missing == [] and w.notes == []
    assert list(w.engines) == ["0"]
    engine = w.engines["0"]
    assert engine.model_name == "/srv/models/tiny-llama"
    assert (engine.requests_finished, engine.preemptions, engine.ttft.count) == (209.0, 0.0, 209.0)
    # One engine: its own window is the whole window, for every counter and histogram.
    for field in ("prompt_tokens", "generation_tokens", "prefix_cache_hits", "prefix_cache_queries"):
        assert getattr(engine, field) == getattr(w, field) is not None, field
    for field in ("queue", "prefill", "decode", "itl", "e2e"):
        assert getattr(engine, field) == getattr(w, field) is not None, field


def test_same_scrape_twice_is_a_zero_window_not_missing():
    text = fixture("0.32.0-cpu-after-load.prom")
    w = window(scrape("before", 0.0, text), scrape("after", 1.0, text))
    assert (w.generation_tokens, w.preemptions, w.ttft.count) == (0.0, 0.0, 0.0)
    assert w.ttft.mean is None and w.ttft.p90_le is None  # nothing observed: no mean, no quantile
    assert w.missing == []


def test_counter_that_went_down_clamps_and_is_noted():
    # The real after-load scrape, then the real idle one: the engine restarted in between.
    w = window(scrape("before", 0.0, fixture("0.32.0-cpu-after-load.prom")),
               scrape("after", 60.0, fixture("0.32.0-cpu-idle.prom")))
    assert w.generation_tokens == 0.0 and w.ttft.count == 0.0  # the after value (0), never negative
    assert any("generation_tokens: a counter went down" in n for n in w.notes)


def test_reset_between_background_scrapes_counts_both_sides():
    name = "vllm:generation_tokens_total"
    w = window(scrape("before", 0.0, exposition({name: 100})),
               scrape("during", 1.0, exposition({name: 150})),
               scrape("during", 2.0, exposition({name: 20})),  # restart, then 20 more
               scrape("after", 3.0, exposition({name: 70})))
    assert w.generation_tokens == 50 + 20 + 50


def test_gauges_span_every_scrape_of_the_window():
    kv, run = "vllm:kv_cache_usage_perc", "vllm:num_requests_running"
    w = window(scrape("before", -0.1, exposition({kv: 0.1, run: 0})),
               scrape("during", 1.0, exposition({kv: 0.97, run: 8})),
               scrape("during", 2.0, exposition({kv: 0.6, run: 5})),
               scrape("after", 3.0, exposition({kv: 0.05, run: 0})))
    assert (w.kv_usage.min, w.kv_usage.max, w.kv_usage.last) == (0.05, 0.97, 0.05)
    assert w.kv_usage.samples == [[-0.1, 0.1], [1.0, 0.97], [2.0, 0.6], [3.0, 0.05]]
    assert w.running.max == 8


def test_absent_family_is_missing_never_zero():
    w = window(scrape("before", 0.0, exposition({"vllm:generation_tokens_total": 1})),
               scrape("after", 1.0, exposition({"vllm:generation_tokens_total": 5})))
    assert w.generation_tokens == 4
    assert w.preemptions is None and w.ttft is None and w.kv_usage is None and w.finished_by_reason == {}
    assert {"preemptions", "finished_by_reason", "ttft", "itl", "kv_usage", "running", "waiting"} <= set(w.missing)
    assert "generation_tokens" not in w.missing


def test_declared_family_without_sample_is_missing():
    # vLLM 0.2.x (aioprometheus): HELP/TYPE for a vllm: gauge and no sample line.
    text = fixture("v0.2.x-pr1890-aioprometheus-first-metrics-endpoint-part.prom")
    declared = text + "# HELP vllm:num_requests_running r\n# TYPE vllm:num_requests_running gauge\n"
    w = window(scrape("before", 0.0, declared), scrape("after", 1.0, declared))
    assert w.running is None and "running" in w.missing


def test_two_engines_summed_and_kept_apart_prefer_itl_over_tpot():
    # vLLM PR #22227: engine 1 exposes both the old TPOT and the new ITL name in one scrape.
    text = fixture("v0.10.x-pr22227-two-engines-tpot-and-itl-coexist-part.prom")
    samples, _ = parse_exposition(text)
    itl_sums = {s.engine: s.value for s in samples if s.metric == "vllm:inter_token_latency_seconds" and s.part == "sum"}
    assert itl_sums == {"0": 13.223765562288463, "1": 3.8492672259453684}
    w = window(scrape("before", 0.0, _scale(text, 0.0)), scrape("after", 10.0, text))
    assert w.itl.metric == "vllm:inter_token_latency_seconds"
    assert w.itl.sum == pytest.approx(13.223765562288463 + 3.8492672259453684)
    assert any("inter_token_latency_seconds and vllm:time_per_output_token_seconds" in n for n in w.notes)
    assert set(w.engines) == {"0", "1"}


def _scale(text: str, factor: float) -> str:
    """The same exposition with every sample value multiplied (a "before" for an excerpt)."""
    out = []
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            out.append(line)
        else:
            head, value = line.rsplit(" ", 1)
            out.append(f"{head} {float(value) * factor!r}")
    return "\n".join(out) + "\n"


def test_one_quantile_rule_gives_both_bounds_of_the_bucket_it_falls_in():
    """The window's ``p90_le`` (upper bound) and ``user_felt``'s p90 interval are one ranking."""
    buckets = [(0.1, 2.0), (0.5, 8.0), (math.inf, 10.0)]
    assert quantile_bounds(buckets, 10, 0.5) == (0.1, 0.5)
    assert quantile_bounds(buckets, 10, 0.9) == (0.5, None)  # in +Inf: no upper bound
    assert quantile_bounds(buckets[:2], 10, 0.9) == (0.5, None)  # finite buckets only: above the largest
    assert quantile_bounds(buckets, 0, 0.5) is None
    assert (quantile_le(dict(buckets), 10, 0.5), quantile_le(dict(buckets), 10, 0.9)) == (0.5, None)


def test_quantile_beyond_the_last_bucket_is_left_empty_and_noted():
    def text(count: int) -> str:
        return (
            "# TYPE vllm:e2e_request_latency_seconds histogram\n"
            f'vllm:e2e_request_latency_seconds_bucket{{le="1.0"}} {count // 2}\n'
            f'vllm:e2e_request_latency_seconds_bucket{{le="+Inf"}} {count}\n'
            f"vllm:e2e_request_latency_seconds_count {count}\n"
            f"vllm:e2e_request_latency_seconds_sum {count * 3.0}\n"
        )

    w = window(scrape("before", 0.0, text(0)), scrape("after", 1.0, text(10)))
    assert (w.e2e.p50_le, w.e2e.p90_le) == (1.0, None)
    assert any("e2e: some quantiles lie above the largest bucket bound (1)" in n for n in w.notes)


def test_old_names_are_read_and_created_series_ignored():
    # V1 ~0.8 (gpu_cache_usage_perc) and 0.10.0 (deprecated gpu_prefix_cache_hits, *_created gauges).
    old = fixture("v0.7-0.8-productionstack318-router-backend-qwen32b-scrape-part.prom")
    w = window(scrape("before", 0.0, old), scrape("after", 1.0, old))
    assert w.metric_names["kv_usage"] == "vllm:gpu_cache_usage_perc" and w.kv_usage.max == 0.0
    glm = fixture("v0.10.0-productionstack617-glm45-engine0-created-series-deprecated-prefix.prom")
    samples, _ = parse_exposition(glm)
    assert not any("created" in s.metric for s in samples)
    w = window(scrape("before", 0.0, _scale(glm, 0.0)), scrape("after", 1.0, glm))
    assert w.metric_names["prefix_cache_hits"] == "vllm:gpu_prefix_cache_hits"
    assert w.prefix_cache_queries == 32.0  # not 1.75e9 from the _created gauge
    assert w.kv_usage.max == pytest.approx(9.75010481363281e-06)


def test_old_v0_histogram_without_engine_label():
    text = fixture("v0.6.x-issue8819-opt125m-ttft-buckets-single-request.prom")
    w = window(scrape("before", 0.0, _scale(text, 0.0)), scrape("after", 1.0, text))
    # One request, 0 in le=0.01 and 1 from le=0.02: every quantile is "<= 0.02 s".
    assert (w.ttft.p50_le, w.ttft.p99_le) == (0.02, 0.02)
    assert list(w.engines) == ["0"] and w.engines["0"].model_name == "facebook/opt-125m"


@pytest.mark.parametrize(
    ("bad", "reason"),
    [
        ({"text": "<html><body><h1>502 Bad Gateway</h1></body></html>", "content_type": "text/html"}, "HTML page"),
        ({"text": "", "error": None}, "empty body"),
        ({"text": "hello world, not metrics"}, "not a Prometheus exposition"),
        ({"text": '{"detail":"Not Found"}', "status": 404, "content_type": "application/json"}, "HTTP 404"),
        ({"text": "", "error": "GET http://127.0.0.1:8000/metrics failed: timed out"}, "timed out"),
        ({"text": "# HELP foo f\n# TYPE foo gauge\nfoo 1\n"}, "no vllm: metric, nor any other engine"),
    ],
)
def test_unusable_scrape_gives_missing_with_the_reason(bad, reason):
    good = fixture("0.32.0-cpu-idle.prom")
    with pytest.raises(Missing, match="only one /metrics scrape succeeded") as info:
        window(scrape("before", 0.0, good), scrape("after", 1.0, **bad))
    assert reason in str(info.value)


def test_empty_body_of_vllm_0_6_1_is_unusable():
    # vllm#8612: 200, the right content type, and nothing in the body.
    raw = fixture("v0.6.1-issue8612-empty-metrics-endpoint-http-headers.txt")
    assert "content-type: text/plain" in raw
    with pytest.raises(Missing, match=r"no /metrics scrape succeeded.*empty body"):
        window(scrape("before", 0.0, ""), scrape("after", 1.0, ""))


def test_garbage_parse_raises_a_short_clear_error():
    with pytest.raises(ExpositionError, match="not a Prometheus exposition") as info:
        parse_exposition("\x00\x01" + "garbage " * 1000)
    assert len(str(info.value)) < 200


def test_no_metrics_no_history_is_missing():
    with pytest.raises(Missing, match="--metrics-url or --prometheus"):
        Evidence(Bundle()).get("metrics_window")


def test_the_same_failure_of_every_scrape_is_said_once_with_a_count():
    """17 scrapes answering 404 are one reason with its count, not 17 copies (issue 13)."""
    failed = [scrape("during", float(t), '{"detail":"Not Found"}', status=404) for t in range(17)]
    with pytest.raises(Missing) as info:
        window(*failed)
    assert "17 of 17 scrapes: /metrics answered HTTP 404" in str(info.value)
    assert str(info.value).count("HTTP 404") == 1


SPEC_V1 = """# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{{engine="0",model_name="m"}} {drafts}
vllm:spec_decode_num_drafts_created{{engine="0",model_name="m"}} 1.756736798733569e+09
# HELP vllm:spec_decode_num_draft_tokens Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{{engine="0",model_name="m"}} {drafted}
# HELP vllm:spec_decode_num_accepted_tokens Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{{engine="0",model_name="m"}} {accepted}
# HELP vllm:spec_decode_num_accepted_tokens_per_pos Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",model_name="m",position="0"}} {accepted}
vllm:num_requests_running{{engine="0",model_name="m"}} 1.0
"""


def test_spec_decode_counters_are_window_deltas_and_the_per_position_series_is_not_counted():
    """vLLM V1's names (v1/spec_decode/metrics.py): the per-position counter shares a prefix, not the name."""
    w = window(scrape("before", 0.0, SPEC_V1.format(drafts=10.0, drafted=50.0, accepted=20.0)),
               scrape("after", 5.0, SPEC_V1.format(drafts=70.0, drafted=350.0, accepted=80.0)))
    assert (w.spec_drafts, w.spec_draft_tokens, w.spec_accepted_tokens) == (60.0, 300.0, 60.0)
    assert w.engines["0"].spec_accepted_tokens == 60.0
    assert w.metric_names["spec_draft_tokens"] == "vllm:spec_decode_num_draft_tokens"


def test_spec_decode_off_is_not_missing_evidence():
    """vLLM registers the spec-decode counters only with a speculative_config: absent is off, not an old vLLM."""
    w = real_run()
    assert (w.spec_draft_tokens, w.spec_accepted_tokens, w.spec_drafts) == (None, None, None)
    assert not {"spec_draft_tokens", "spec_accepted_tokens", "spec_drafts"} & set(w.missing)


def test_v0_spec_decode_counters_have_no_drafts_counter():
    """V0 (0.5.4-0.9) named its counters with _total in code and had no drafts counter."""
    text = ("vllm:spec_decode_num_accepted_tokens_total{{model_name=\"m\"}} {a}\n"
            "vllm:spec_decode_num_draft_tokens_total{{model_name=\"m\"}} {d}\n"
            "vllm:num_requests_running{{model_name=\"m\"}} 0.0\n")
    w = window(scrape("before", 0.0, text.format(a=0, d=0)), scrape("after", 5.0, text.format(a=8547, d=13311)))
    assert (w.spec_accepted_tokens, w.spec_draft_tokens, w.spec_drafts) == (8547.0, 13311.0, None)
