"""Direct tests of the proxy-only checks (LD301-LD305) and of the real nginx trace converter.

A check called directly gets the ``gateway`` view only when the test passes it (``gateway_of``),
as the runner does; without it the remediation speaks to "the gateway".
"""

from __future__ import annotations

from checks.gateway_overhead import gateway_overhead
from checks.gateway_serialisation import gateway_serialisation
from checks.proxy_buffering import proxy_buffering
from checks.proxy_read_timeout import idle_before_cut, proxy_read_timeout
from checks.stream_compression import stream_compression
from doctor.checking.contract import Fire, NotApplicable, Pass
from doctor.checking.registry import load_registry
from doctor.checking.runner import run_check
from doctor.derive import Evidence
from doctor.derive.stream_stats import derive_stream_stats
from doctor.evidence import Endpoint, EndpointsEvidence
from doctor.model import Outcome
from tests.support import nginx_traces
from tests.support.bundles import bundle, request, stream
from tests.support.make_check_fixtures_proxy import SSE, cut_after, paths


def stats_of(ev):
    return derive_stream_stats(bundle(stream=ev))


def gateway_of(ev, endpoints=None):
    """The ``gateway`` view the runner would pass: which gateway the responses name."""
    return Evidence(bundle(stream=ev, endpoints=endpoints)).get("gateway")


def test_converter_keeps_the_real_burst_structure():
    reqs = nginx_traces.load("relay-default", "chat", "gateway", keep_tokens=10_000)
    for req in reqs:
        assert sum(r.events for r in req.reads) == len(req.tokens)
        burst_reads = [r for r in req.reads if r.events > 1]
        assert burst_reads and all(r.nbytes >= 4096 for r in burst_reads[:-1])
        # headers came with the first burst: the first token is the first read
        assert req.tokens[0].t == req.reads[0].t
    direct = nginx_traces.load("direct", "chat", "direct", keep_tokens=10_000)
    assert all(r.events <= 1 for req in direct for r in req.reads)


def test_converter_truncates_at_a_read_boundary():
    (req, *_) = nginx_traces.load("relay-default", "chat", "gateway", keep_tokens=20)
    assert len(req.tokens) == sum(r.events for r in req.reads) > 20
    assert req.t_last_token == req.reads[-1].t


def test_buffering_on_the_real_relay_names_the_nginx_directive_and_its_companions():
    ev = nginx_traces.direct_vs("relay-default")
    out = proxy_buffering(stats_of(ev), gateway=gateway_of(ev))
    assert isinstance(out, Fire)
    rem = out.remediation
    assert (rem.setting, rem.suggested) == ("proxy_buffering", "off")
    for needle in ("proxy_http_version 1.1", "X-Accel-Buffering: no", "proxy_ignore_headers"):
        assert needle in rem.why
    assert "4 KiB" in rem.why  # the burst size read from the trace


def test_buffering_reads_the_server_from_the_endpoint_probe_when_the_stream_lacks_it():
    ev = paths([0.1] * 2, [0.1] * 2, gaps=[0.03] * 21, burst_bytes=2048, gateway_headers=dict(SSE))
    endpoints = EndpointsEvidence(
        [Endpoint(role="gateway", url="http://127.0.0.1:8080", headers={"Server": "nginx"})]
    )
    with_probe = proxy_buffering(stats_of(ev), endpoints, gateway_of(ev, endpoints))
    without = proxy_buffering(stats_of(ev), gateway=gateway_of(ev))
    assert isinstance(with_probe, Fire) and isinstance(without, Fire)
    assert with_probe.remediation.suggested == "off"
    assert without.remediation.suggested != "off" and "nginx" not in (without.remediation.where or "")


def test_buffering_is_judged_against_the_direct_path():
    # Both paths coalesce events (a slow client, or the server bundling): not the gateway's doing.
    reqs = [
        request(path, i, ttft=0.1, gaps=[0.03] * 21, start=i * 5.0, burst_bytes=2048, headers=SSE)
        for i, path in enumerate(("direct", "direct", "gateway", "gateway"))
    ]
    out = proxy_buffering(stats_of(stream(reqs)))
    assert isinstance(out, Pass) and "no bursts" in out.message


def test_buffering_threshold_override_through_the_runner():
    spec = load_registry(plugins=False).find("LD301")
    evidence = Evidence(bundle(stream=nginx_traces.direct_vs("relay-default")))
    assert run_check(spec, evidence, {}).outcome is Outcome.FINDING
    assert run_check(spec, evidence, {"LD301": {"burst_factor": "100"}}).outcome is Outcome.PASS


def test_compression_recognises_every_encoding_and_header_case():
    for enc, server, setting in (
        ("br", "Traefik", "compress"),
        ("zstd", "nginx/1.25", "gzip"),
        ("gzip", "uvicorn", "response compression"),  # vLLM's own Server header, passed on: no gateway named
        ("deflate", None, "response compression"),
    ):
        headers = {"Content-Type": "text/event-stream", "Content-Encoding": enc.upper()}
        if server:
            headers["Server"] = server
        ev = paths([0.1], [0.1], gaps=[0.03] * 5, gateway_headers=headers)
        out = stream_compression(stats_of(ev), gateway=gateway_of(ev))
        assert isinstance(out, Fire), enc
        assert out.remediation.setting == setting
        assert enc in out.summary


def test_compression_already_on_the_direct_path_is_the_origins():
    headers = {"content-type": "text/event-stream", "content-encoding": "gzip"}
    reqs = [
        request("direct", 0, ttft=0.1, gaps=[0.03] * 5, headers={**headers, "server": "uvicorn"}),
        request("gateway", 1, ttft=0.1, gaps=[0.03] * 5, start=5.0, headers={**headers, "server": "nginx"}),
    ]
    out = stream_compression(stats_of(stream(reqs)))
    assert isinstance(out, Fire) and out.summary.startswith("direct")
    assert out.remediation.setting == "GZipMiddleware"


def test_compression_of_a_json_body_is_not_a_stream_problem():
    headers = {"content-type": "application/json", "content-encoding": "gzip"}
    out = stream_compression(stats_of(paths([0.1], [0.1], gaps=[0.03] * 5, gateway_headers=headers)))
    assert isinstance(out, Pass)


def test_serialisation_counts_the_staircase_steps():
    answer = 0.1 + 8 * 0.15
    ev = paths([0.1, 0.1, 0.1, 0.1], [0.1 + k * answer for k in range(4)], gaps=[0.15] * 8, concurrency=4)
    out = gateway_serialisation(stats_of(ev))
    assert isinstance(out, Fire)
    steps = next(e.value for e in out.evidence if e.name == "staircase steps")
    assert steps == 3
    assert out.remediation.suggested == "async streaming client in the edge"


def test_serialisation_ignores_a_direct_path_that_spreads_as_much():
    ttfts = [0.1, 1.4, 2.7, 4.0]
    ev = paths(ttfts, [t + 0.02 for t in ttfts], gaps=[0.15] * 8, concurrency=4)
    assert isinstance(gateway_serialisation(stats_of(ev)), Pass)


def test_overhead_must_be_constant():
    # Two requests far slower through the gateway, the others not: no fixed per-request cost.
    ev = paths([0.1] * 4, [0.1, 0.1, 0.9, 1.0], gaps=[0.03] * 8)
    out = gateway_overhead(stats_of(ev))
    assert isinstance(out, Pass) and "not constant" in out.message


def test_overhead_below_the_noise_floor_passes():
    ev = paths([0.05] * 3, [0.08] * 3, gaps=[0.03] * 8)  # +30 ms, 38 %
    assert isinstance(gateway_overhead(stats_of(ev)), Pass)
    assert isinstance(gateway_overhead(stats_of(ev), min_added_s=0.01), Fire)


def test_read_timeout_counts_a_504_before_the_first_token():
    reqs = [
        request("direct", 0, ttft=75.0, gaps=[0.03] * 3),
        request("gateway", 1, ttft=0.1, gaps=[], outcome="http-status", start=100.0),
    ]
    reqs[1].status, reqs[1].t_headers, reqs[1].headers = 504, 160.0, {"server": "nginx"}
    assert idle_before_cut(reqs[1]) == 60.0
    out = proxy_read_timeout(stream(reqs), gateway_of(stream(reqs)))
    assert isinstance(out, Fire)
    assert out.remediation.suggested == "300s" and "proxy_read_timeout 300s;" in (out.remediation.where or "")


def test_read_timeout_wants_one_fixed_idle_time():
    ev = paths(
        [0.1] * 2,
        [0.1] * 3,
        gaps=[0.03] * 8 + [70.0] + [0.03] * 3,
        gateway_headers={**SSE, "server": "envoy"},
    )
    gateway = [r for r in ev.requests if r.path == "gateway"]
    cut_after(gateway[0], 9, 12.0)
    assert isinstance(proxy_read_timeout(ev), Pass)  # one cut, no known default near 12 s
    cut_after(gateway[1], 9, 31.0)
    out = proxy_read_timeout(ev)
    assert isinstance(out, Pass) and "not one fixed timeout" in out.message
    cut_after(gateway[2], 9, 12.5)
    gateway[1].t_failed = gateway[1].reads[-1].t + 12.2
    assert isinstance(proxy_read_timeout(ev), Fire)


def test_checks_without_both_paths_are_not_applicable():
    only_direct = stats_of(paths([0.1] * 2, [], gaps=[0.03] * 4))
    for func in (proxy_buffering, gateway_overhead):
        assert isinstance(func(only_direct), NotApplicable)
