"""Direct tests of the general checks (LD501-LD507) on hand-built views."""

from __future__ import annotations

from checks.client_suspect import client_suspect
from checks.error_rate import error_rate, failure_key
from checks.low_throughput import low_throughput
from checks.prefix_cache_efficiency import prefix_cache_efficiency
from checks.queue_latency import queue_latency
from checks.replica_imbalance import imbalance_signals, replica_imbalance
from doctor.checking.contract import Fire, NotApplicable, Pass
from doctor.derive.log_facts import Fact, LogFacts
from doctor.derive.metrics_window import EngineWindow, GaugeWindow, HistogramWindow, MetricsWindow
from doctor.evidence import ClientHealth, HostEvidence, RunRecord
from tests.support.bundles import bundle, request
from tests.support.make_check_fixtures_general import probe


def gauge(peak: float) -> GaugeWindow:
    return GaugeWindow(min=0.0, max=peak, last=peak)


def test_failure_keys_pick_the_fix():
    cases = {
        (400, '{"message":"This model\'s maximum context length is 2048 tokens"}'): "http-too-long",
        (400, '{"message":"bad json"}'): "http-4xx",
        (401, None): "http-401",
        (502, None): "http-5xx",
    }
    for (status, body), key in cases.items():
        req = request("direct", 0, ttft=0, gaps=[], outcome="http-status")
        req.status, req.body_excerpt = status, body
        assert failure_key(req) == key
    too_long = probe(failed=8, status=400)
    for req in too_long.requests:
        req.body_excerpt = "maximum context length is 2048 tokens"
    out = error_rate(bundle(stream=too_long))
    assert isinstance(out, Fire) and out.remediation.setting == "max_model_len"


def test_a_404_names_the_model_only_when_the_body_does():
    """``--route responses`` against a server without /v1/responses once suggested served_model_name."""
    for body, setting in (('{"detail":"Not Found"}', "route"),
                          ('{"error":{"message":"The model `llama` does not exist.","type":"NotFoundError"}}', "served_model_name")):
        missing = probe(failed=8, status=404)
        for req in missing.requests:
            req.body_excerpt = body
        out = error_rate(bundle(stream=missing))
        assert isinstance(out, Fire) and out.remediation.setting == setting


def test_error_rate_threshold_and_warmup():
    ev = probe(failed=1, n=30)  # 3 %
    assert isinstance(error_rate(bundle(stream=ev)), Pass)
    assert isinstance(error_rate(bundle(stream=ev), max_failure_share=0.02), Fire)
    for req in ev.requests:
        req.warmup = not req.ok  # a failed warm-up is a cold start, not an error rate
    assert "0 of 29" in error_rate(bundle(stream=ev), max_failure_share=0.0).message


def test_low_throughput_is_suppressed_by_a_queue():
    w = MetricsWindow(
        window_s=60.0, prompt_tokens=60, generation_tokens=300, running=gauge(1), waiting=gauge(3)
    )
    assert isinstance(low_throughput(w), Pass)
    w.waiting = gauge(0)
    assert isinstance(low_throughput(w), Fire)


def test_prefix_cache_off_names_the_flag():
    w = MetricsWindow(prefix_cache_hits=100, prefix_cache_queries=20_000)
    lf = LogFacts(facts={"enable_prefix_caching": Fact(False, line=12)})
    out = prefix_cache_efficiency(w, lf)
    assert isinstance(out, Fire)
    assert (out.remediation.setting, out.remediation.current) == ("enable_prefix_caching", "False")
    assert isinstance(
        prefix_cache_efficiency(MetricsWindow(prefix_cache_hits=1, prefix_cache_queries=10)), NotApplicable
    )


def test_queue_latency_reads_the_bucket_bound():
    w = MetricsWindow(queue=HistogramWindow(count=40, sum=20, mean=0.5, p90_le=2.5))
    assert isinstance(queue_latency(w), Fire)
    assert isinstance(queue_latency(w, max_queue_p90_s=5.0), Pass)


def test_replica_signals_need_load_and_a_peer():
    quiet = [
        EngineWindow(engine="0", model_name="m", running=gauge(2), requests_finished=3),
        EngineWindow(engine="1", model_name="m", running=gauge(0), requests_finished=1),
    ]
    assert (
        imbalance_signals(
            quiet, imbalance_factor=2, cache_gap=0.3, min_total_running=5, min_total_finished=10
        )
        == []
    )
    other_model = MetricsWindow(
        engines={"0": EngineWindow(engine="0", model_name="a", running=gauge(9)), "1": EngineWindow(engine="1", model_name="b", running=gauge(0))}
    )
    assert isinstance(replica_imbalance(other_model), NotApplicable)
    same_model = MetricsWindow(
        engines={"0": EngineWindow(engine="0", model_name="a", running=gauge(9)), "1": EngineWindow(engine="1", model_name="a", running=gauge(0))}
    )
    out = replica_imbalance(same_model)
    assert isinstance(out, Fire) and "one engine idle" in out.summary and out.severity.value == "info"


def test_client_suspect_suggests_half_the_concurrency():
    ev = probe()
    ev.shape.concurrency = 16
    ev.client = ClientHealth(loop_lag_p99_ms=50, suspect=True, reasons=["cpu saturated"])
    out = client_suspect(ev)
    assert (
        isinstance(out, Fire) and out.remediation.suggested.startswith("8") and "cpu saturated" in out.summary
    )


def test_client_suspect_on_a_load_run_with_idle_cpus_suggests_more_client_workers():
    ev = probe()
    ev.shape.concurrency, ev.shape.scenario = 256, "single"
    ev.client = ClientHealth(loop_lag_p99_ms=50, suspect=True, cpu_count=8, shards=[ClientHealth(), ClientHealth()])
    out = client_suspect(ev)
    assert isinstance(out, Fire) and out.remediation.setting == "client_workers"
    assert out.remediation.current == "2" and out.remediation.suggested.startswith("4")
    ev.client = ClientHealth(loop_lag_p99_ms=50, suspect=True, cpu_count=1)  # no CPU to spare: less load
    out = client_suspect(ev)
    assert isinstance(out, Fire) and out.remediation.setting == "concurrency"
    assert out.remediation.where is not None and "--max-concurrency" in out.remediation.where  # load sets its own


def test_client_suspect_names_where_each_command_sets_its_client_workers():
    ev = probe()
    ev.shape.concurrency = 64
    ev.client = ClientHealth(loop_lag_p99_ms=50, cpu_percent_max=100, suspect=True, cpu_count=8)
    for command in ("diagnose", "collect", "watch", "load", "sweep"):
        out = client_suspect(ev, run=RunRecord(command=command))
        assert isinstance(out, Fire) and out.remediation.setting == "client_workers"
        assert out.remediation.where == f"llm-doctor {command} --client-workers, or client_workers in the config file's [probe]"
    out = client_suspect(ev, run=RunRecord(command="probe"))  # no --client-workers flag: every command that has one
    assert isinstance(out, Fire) and out.remediation.where is not None
    assert "diagnose / collect / watch / load / sweep" in out.remediation.where


def test_client_suspect_spreads_a_sharded_client_only_over_cpus_beside_its_parent_and_streams_it_has():
    ev = probe()
    ev.client = ClientHealth(loop_lag_p99_ms=50, suspect=True, cpu_count=6, shards=[ClientHealth()] * 4)
    ev.shape.concurrency = 8  # two slots per worker of twice the workers: the CPUs bound it (6, less the parent's)
    out = client_suspect(ev)
    assert isinstance(out, Fire) and out.remediation.setting == "client_workers"
    assert (out.remediation.current, out.remediation.suggested.split()[0]) == ("4", "5")
    ev.shape.concurrency = 7  # fewer streams than twice the workers: nothing to spread
    out = client_suspect(ev)
    assert isinstance(out, Fire) and out.remediation.setting == "concurrency" and "too few streams" in out.remediation.why


def test_client_suspect_takes_a_host_loaded_past_its_cpus_as_saturated_whatever_its_cpu_snapshot():
    ev = probe()
    ev.shape.concurrency = 64
    ev.client = ClientHealth(loop_lag_p99_ms=50, cpu_percent_max=100, suspect=True, cpu_count=8)
    busy = HostEvidence(cpu_count_logical=8, cpu_percent=40.0, load_avg=[9.0, 8.0, 8.0])
    out = client_suspect(ev, host=busy)
    assert isinstance(out, Fire) and out.remediation.setting == "concurrency" and "load 9 on 8 CPUs" in out.summary
    out = client_suspect(ev, host=HostEvidence(cpu_count_logical=8, cpu_percent=40.0, load_avg=[3.0, 3.0, 3.0]))
    assert isinstance(out, Fire) and out.remediation.setting == "client_workers"
    out = client_suspect(ev, host=busy, host_percent=30.0)  # the option: the CPU alone counts too
    assert isinstance(out, Fire) and "40 % CPU" in out.summary


def test_client_suspect_in_the_demo_never_names_a_concurrency_flag_demo_lacks():
    """Issue 30 item 12: the demo's finding said to change --concurrency, which ``demo`` does not take."""
    ev = probe()
    ev.shape.concurrency = 16
    ev.client = ClientHealth(loop_lag_p99_ms=50, suspect=True, reasons=["cpu saturated"])
    out = client_suspect(ev, run=RunRecord(command="demo"))
    assert isinstance(out, Fire) and out.remediation.where is not None
    assert "--concurrency" not in out.remediation.where and "scenario" in out.remediation.where
