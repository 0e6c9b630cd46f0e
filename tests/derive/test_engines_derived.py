"""What an engine lacks, derived where its other evidence allows, and its remediations in its own words.

TGI's TTFT from its queue and prefill-forward histograms (scrapes in the exposition TGI's
``metrics`` exporter writes, with the names of ``backends/v3/src/backend.rs``; synthetic values);
and, for an SGLang and a llama.cpp bundle (real startup logs of ``fixtures/engines/``, synthetic
scrapes in each engine's metric names), every remediation that fires speaks of that engine.
"""

from __future__ import annotations

import json

import pytest

from doctor.bundle import dumps
from doctor.checking.runner import analyze
from doctor.derive.user_felt import server_witness
from doctor.engine_metrics.derived import SLOTS_KV_USAGE, TGI_TTFT
from doctor.engine_metrics.metric_names import FAMILY_BY_KEY
from doctor.engine_metrics.window import window_from_scrapes
from doctor.engine_readers import normal
from doctor.engine_readers.capacity import capacity_from_exposition
from doctor.engines import server_info
from doctor.evidence import Bundle, Scrape
from doctor.foundation.clock import Clock
from doctor.probes.metrics import Scraper
from doctor.probes.prometheus import family_queries
from tests.parsers.test_engine_self_report import LLAMACPP_METRICS_BUSY, LLAMACPP_SLOTS_BUSY, SERVER_INFO
from tests.probes.test_endpoints_probe import send, serve
from tests.support.bundles import bundle, real_log, stream
from tests.support.make_check_fixtures_engine import GIB, gpu, h100, hist, load_scrapes, long_context, stalled, steady

LLAMACPP_METRICS = (SERVER_INFO / LLAMACPP_METRICS_BUSY).read_text()

BOUNDS = (0.01, 0.1, 1.0, 10.0)


def _histogram(name: str, observations: list[float], labels: str = "") -> list[str]:
    lines = [f"# TYPE {name} histogram"]
    sep = "," if labels else ""
    for le in (*BOUNDS, "+Inf"):
        n = sum(1 for o in observations if le == "+Inf" or o <= float(le))
        lines.append(f'{name}_bucket{{{labels}{sep}le="{le}"}} {n}')
    braces = f"{{{labels}}}" if labels else ""
    return [*lines, f"{name}_sum{braces} {sum(observations)}", f"{name}_count{braces} {len(observations)}"]


def _tgi_scrape(t: float, queue: list[float], prefill: list[float], decode: list[float]) -> Scrape:
    lines = ["# TYPE tgi_queue_size gauge", "tgi_queue_size 0", "# TYPE tgi_batch_current_size gauge",
             "tgi_batch_current_size 2", *_histogram("tgi_request_queue_duration", queue)]
    # One family, two methods: only prefill steps precede a first token.
    lines += _histogram("tgi_batch_forward_duration", prefill, 'method="prefill"')[1:]
    lines += _histogram("tgi_batch_forward_duration", decode, 'method="decode"')[1:]
    return Scrape(phase="during", t=t, wall=1.7e9 + t, status=200, content_type="text/plain", text="\n".join(lines) + "\n")


def test_tgi_ttft_is_its_queue_time_plus_its_prefill_forward_time_marked_derived() -> None:
    queue = [0.5] * 20 + [2.5] * 20  # mean 1.5 s
    window = window_from_scrapes([_tgi_scrape(0.0, [], [], []),
                                  _tgi_scrape(10.0, queue, [0.25] * 10, [0.02] * 400)])
    assert window.engine_kind == "tgi"
    assert window.prefill_forward is not None and window.prefill_forward.mean == pytest.approx(0.25)  # no decode step
    ttft = window.ttft
    assert ttft is not None and ttft.derived and ttft.metric == TGI_TTFT
    assert ttft.mean == pytest.approx(1.75) and ttft.count == 40
    assert ttft.p90_le is None and ttft.buckets == []  # a sum of two distributions has no quantile
    assert "ttft" not in window.missing and any("derived" in n for n in window.notes)
    witness = server_witness(window)
    assert witness is not None and witness.ttft is not None and witness.ttft.mean_only


def test_without_its_prefill_forward_histogram_tgi_ttft_stays_missing() -> None:
    queue = [1.0] * 10
    text = "\n".join(_histogram("tgi_request_queue_duration", queue)) + "\n"
    empty = "\n".join(_histogram("tgi_request_queue_duration", [])) + "\n"
    scrapes = [Scrape(phase=p, t=t, wall=1.7e9 + t, status=200, text=x) for p, t, x in
               (("before", 0.0, empty), ("after", 5.0, text))]
    window = window_from_scrapes(scrapes)
    assert window.ttft is None and "ttft" in window.missing


def test_vllm_windows_do_not_list_tgis_prefill_forward_as_missing() -> None:
    assert FAMILY_BY_KEY["prefill_forward"].only_with is not None


def test_prometheus_is_asked_for_tgis_prefill_steps_alone() -> None:
    queries = family_queries(FAMILY_BY_KEY["prefill_forward"], "tgi_batch_forward_duration", '{job="tgi"}', 60)
    assert all('method="prefill"' in q and 'job="tgi"' in q for _, _, q in queries)


# --------------------------------------------------------------------------- remediations in the engine's words


def _remediation_texts(b: Bundle) -> dict[str, str]:
    report = analyze(b)
    out = {}
    for finding in report.findings:
        r = finding.remediation
        if r is not None:
            out[finding.code] = " | ".join(str(v) for v in (r.current, r.suggested, r.where, r.why, r.verify) if v)
    return out


def _sglang() -> list[Bundle]:
    sglang_log = real_log("sglang/v0.5.4.post3-issue12726-startup-kv-graph-limits.log", folder="engines")
    pressure = load_scrapes(
        {}, {"sglang:token_usage": 0.97, "sglang:num_running_reqs": 48, "sglang:num_queue_reqs": 30,
             "sglang:num_retracted_requests_total": 0, "sglang:queue_time_seconds": hist(4.0, 40),
             "sglang:time_to_first_token_seconds": hist(5.0, 40)},
        {"sglang:num_retracted_requests_total": 3, "sglang:token_usage": 0.1,
         "sglang:queue_time_seconds": hist(4.0, 40), "sglang:time_to_first_token_seconds": hist(5.0, 40)})
    streams = long_context(stalled(8, stall=9.0), 8)
    return [bundle(stream=streams, metrics=pressure, log=sglang_log,
                   gpu=gpu(h100(memory_used_bytes=48 * GIB, memory_free_bytes=32 * GIB))),
            bundle(stream=streams, metrics=pressure, log=sglang_log)]


def _llamacpp() -> list[Bundle]:
    falcon = real_log("llamacpp/b4351-falcon3-1b-vulkan-startup.log", folder="engines")
    deferred = load_scrapes({}, {"llamacpp:requests_deferred": 3, "llamacpp:requests_processing": 1}, {})
    return [bundle(stream=stream(steady(4, ttft=6.3, gap=0.004), concurrency=4), metrics=deferred, log=falcon),
            bundle(stream=long_context(stalled(8, stall=9.0), 8), metrics=deferred, log=falcon,
                   gpu=gpu(h100(memory_used_bytes=48 * GIB, memory_free_bytes=32 * GIB)))]


@pytest.mark.parametrize(("engine", "make", "expected"), [
    ("SGLang", _sglang, {"LD101", "LD201", "LD401", "LD504"}),
    ("llama.cpp", _llamacpp, {"LD101", "LD202"}),
])
def test_remediations_on_another_engine_mention_no_vllm(engine: str, make, expected: set[str]) -> None:
    texts: dict[str, str] = {}
    for b in make():
        texts.update({f"{code}#{len(texts)}": text for code, text in _remediation_texts(b).items()})
    assert expected <= {key.split("#")[0] for key in texts}, texts.keys()  # the checks this is about fired
    assert {key: text for key, text in texts.items() if "vllm" in text.lower()} == {}
    assert any(engine in text for text in texts.values())


def test_tgi_states_its_kv_budget_in_a_gauge() -> None:
    text = "# TYPE tgi_batch_max_total_tokens gauge\ntgi_batch_max_total_tokens 19056\n"
    assert capacity_from_exposition(text)["kv_cache_tokens"] == 19056


# --------------------------------------------------------------------------- llama.cpp's KV usage from /slots

SLOTS_BUSY = SERVER_INFO / LLAMACPP_SLOTS_BUSY


def test_busy_slots_hold_a_share_of_the_kv_cells_and_idle_ones_none() -> None:
    busy = server_info.slot_fields(json.loads(SLOTS_BUSY.read_text()))
    assert busy is not None and all("prompt" not in s and "generated" not in s for s in busy)
    assert all(s["is_processing"] for s in busy)
    usage = server_info.slots_kv_usage(busy)
    cells = sum(s["n_ctx"] for s in busy)
    # Each busy slot's KV holds its prompt and what it decoded so far (402 + 151 = 553 here).
    assert all(s["n_prompt_tokens"] == s["n_prompt_tokens_processed"] + s["n_decoded"] for s in busy)
    assert usage == pytest.approx(sum(s["n_prompt_tokens"] for s in busy) / cells)
    assert 0 < usage < 1
    assert server_info.slots_kv_usage([{**s, "is_processing": False} for s in busy]) == 0.0
    assert server_info.slot_fields({"error": "This server does not support slots endpoint"}) is None


def test_each_llama_server_scrape_takes_its_slots_and_the_window_reads_kv_usage_from_them() -> None:
    slots = SLOTS_BUSY.read_text()
    routes = {"/metrics": lambda h: send(h, 200, LLAMACPP_METRICS.encode(), "text/plain; version=0.0.4"),
              "/slots": lambda h: send(h, 200, slots.encode(), "application/json")}
    with serve(routes, "llama.cpp") as (base, seen):
        s = Scraper(base + "/metrics", Clock(), interval_s=0, timeout_s=5)
        s.scrape("before")
        s.scrape("after")
        evidence, errors = s.result()
    assert errors == [] and [r["path"] for r in seen] == ["/metrics", "/slots"] * 2
    window = window_from_scrapes(evidence.scrapes)
    assert window.kv_usage is not None and window.metric_names["kv_usage"] == SLOTS_KV_USAGE
    assert window.kv_usage.max == pytest.approx(server_info.slots_kv_usage(evidence.scrapes[0].slots or []))
    assert "kv_usage" not in window.missing
    assert '"prompt"' not in dumps(Bundle(metrics=evidence))  # the users' text is never kept


def test_a_llama_server_without_slots_is_asked_once_and_says_its_kv_usage_is_not_exposed() -> None:
    routes = {"/metrics": lambda h: send(h, 200, LLAMACPP_METRICS.encode(), "text/plain; version=0.0.4"),
              "/slots": lambda h: send(h, 501, b'{"error":{"code":501}}', "application/json")}
    with serve(routes, "llama.cpp") as (base, seen):
        s = Scraper(base + "/metrics", Clock(), interval_s=0, timeout_s=5)
        for phase in ("before", "during", "after"):
            s.scrape(phase)
        evidence, errors = s.result()
    assert errors == [] and [r["path"] for r in seen].count("/slots") == 1
    window = window_from_scrapes(evidence.scrapes)
    assert window.kv_usage is None
    facts = normal.from_window(window)
    assert normal.not_exposed("llama.cpp", facts, "metrics")["kv_usage"] == "not exposed by llama.cpp's metrics"
