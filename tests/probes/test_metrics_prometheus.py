"""Prometheus history mode against a real Prometheus (Debian package ``prometheus``) scraping a
local vLLM-shaped exporter, and against answers recorded from that same setup.

The exporter advances by a known amount on every scrape (``tests.support.vllm_exporter.TICK``),
so ``increase`` results are asserted as ratios (Prometheus extrapolates to the window edges, by
the same factor for every series of one scrape), never as absolute counts or times.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from doctor.derive import Evidence
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.missing import Missing
from doctor.evidence import Bundle, MetricsEvidence, PrometheusEvidence, Scrape
from doctor.foundation.serial import load
from doctor.probes.prometheus import query_history
from tests.support.nginx import free_port
from tests.support.prometheus import run_prometheus, scrapes, wait_for
from tests.support.vllm_exporter import TICK, Exporter

RECORDED = Path(__file__).resolve().parents[2] / "fixtures" / "metrics" / "prometheus-2.42-ticking-two-engines.json"
SCRAPES_WANTED = 6


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory) -> Iterator[str]:
    # Engine 1 names its counters without _total, as vLLM 0.2 did: history must count it alike.
    with Exporter(ticking=True, bare=("1",)) as exporter:
        target = exporter.url.split("//", 1)[1].split("/", 1)[0]
        with run_prometheus([target], tmp_path_factory.mktemp("prometheus")) as url:
            wait_for(lambda: scrapes(url) >= SCRAPES_WANTED, f"{SCRAPES_WANTED} scrapes of the exporter")
            yield url


def assert_ticking_window(w: MetricsWindow) -> None:
    """What any window over the ticking exporter must show, whatever the number of scrapes."""
    assert w.source == "prometheus"
    x = w.engines["0"].preemptions
    assert x > 0 and w.engines["1"].preemptions == pytest.approx(x)
    assert w.preemptions == pytest.approx(2 * x)
    assert w.generation_tokens == pytest.approx(TICK["generation_tokens"] * 2 * x)
    assert w.prompt_tokens == pytest.approx(TICK["prompt_tokens"] * 2 * x)
    assert w.engines["0"].generation_tokens == pytest.approx(w.engines["1"].generation_tokens) == pytest.approx(
        TICK["generation_tokens"] * x)  # per engine too, whichever name its counters had
    assert w.finished_by_reason == {"length": pytest.approx(TICK["length"] * 2 * x), "stop": 0.0}
    assert w.ttft.count == pytest.approx(TICK["ttft_count"] * 2 * x)
    assert w.ttft.mean == pytest.approx(TICK["ttft_sum"] / TICK["ttft_count"])
    assert (w.ttft.p50_le, w.ttft.p99_le) == (0.25, 0.25)
    # KV: engine 0 cycles 0.1 .. 0.9, engine 1 is half of it; across engines, the fullest.
    assert (w.kv_usage.min, w.kv_usage.max) == (0.1, 0.9)
    assert w.engines["1"].kv_usage.max == 0.45
    assert w.running.max == 6.0 and w.engines["0"].running.max == 3.0  # sum of engines at one instant
    assert w.kv_usage.samples and all(-1e-6 <= t <= w.window_s + 1e-6 for t, _ in w.kv_usage.samples)
    assert w.metric_names["kv_usage"] == "vllm:kv_cache_usage_perc"
    # Absent families and the declared-but-never-sampled waiting gauge are missing, not 0.
    assert {"waiting", "itl", "queue", "prefix_cache_hits"} <= set(w.missing)
    assert w.waiting is None and w.itl is None


@pytest.mark.slow
@pytest.mark.prometheus
@pytest.mark.parametrize("selector", ['{job="vllm"}', 'job="vllm"', ""])
def test_history_from_a_real_prometheus(prometheus, selector):
    evidence, errors = query_history(prometheus, since_s=300, selector=selector, timeout_s=10)
    assert errors == []
    assert all(q.error is None and json.loads(q.response)["status"] == "success" for q in evidence.queries)
    assert_ticking_window(Evidence(Bundle(prometheus=evidence)).get("metrics_window"))


@pytest.mark.slow
@pytest.mark.prometheus
def test_selector_that_matches_nothing_is_missing(prometheus):
    evidence, errors = query_history(prometheus, since_s=300, selector='job="not-vllm"')
    assert errors == []
    with pytest.raises(Missing, match='no vllm: series matched job="not-vllm"'):
        Evidence(Bundle(prometheus=evidence)).get("metrics_window")


@pytest.mark.slow
@pytest.mark.prometheus
def test_invalid_selector_stops_at_the_first_query(prometheus):
    evidence, errors = query_history(prometheus, since_s=300, selector='{job=~"("}')
    assert len(evidence.queries) == 1 and len(errors) == 1
    assert errors[0].fatal and errors[0].kind == "http-status" and "bad_data" in errors[0].message


def test_recorded_answers_of_a_real_prometheus():
    # Recorded by test_history_from_a_real_prometheus's setup (see fixtures/PROVENANCE.md).
    evidence = load(PrometheusEvidence, json.loads(RECORDED.read_text()))
    assert_ticking_window(Evidence(Bundle(prometheus=evidence)).get("metrics_window"))


def test_unreachable_prometheus_is_one_fatal_error():
    port = free_port()  # nothing listens there
    evidence, errors = query_history(f"http://127.0.0.1:{port}", since_s=900, timeout_s=2)
    assert len(evidence.queries) == 1 and len(errors) == 1
    assert errors[0].source == "prometheus" and errors[0].kind == "connect" and errors[0].fatal
    with pytest.raises(Missing, match="Prometheus answered no query"):
        Evidence(Bundle(prometheus=evidence)).get("metrics_window")


def test_a_url_that_is_not_prometheus_is_one_fatal_error():
    with Exporter() as ex:
        ex.answer.body = "<html>login</html>"
        ex.answer.content_type = "text/html"
        _, errors = query_history(ex.url.removesuffix("/metrics"), since_s=60, timeout_s=2)
    assert len(errors) == 1 and errors[0].kind == "malformed" and "not a Prometheus HTTP API" in errors[0].message


def test_scrapes_preferred_then_history_as_fallback():
    evidence = load(PrometheusEvidence, json.loads(RECORDED.read_text()))
    one = MetricsEvidence(url="u", scrapes=[Scrape("before", 0.0, 0.0, error="GET u failed: timed out")])
    w = Evidence(Bundle(metrics=one, prometheus=evidence)).get("metrics_window")
    assert w.source == "prometheus"
    assert any("scrapes unusable" in n and "timed out" in n for n in w.notes)


def test_a_prometheus_that_hangs_costs_two_deadlines_not_thirty():
    with Exporter() as ex:
        ex.answer.delay_s = 1.0
        evidence, errors = query_history(ex.url.removesuffix("/metrics"), since_s=60, timeout_s=0.2)
    assert len(evidence.queries) == 2 and [e.kind for e in errors] == ["timeout", "timeout"]
    assert [e.fatal for e in errors] == [False, True]
