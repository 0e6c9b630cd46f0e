"""The scenario registry and ``start_lab``: start, serve, shut down, and (slow) each scenario's
signature as a plain client sees it. The verdicts themselves are asserted in test_demo.py."""

from __future__ import annotations

import asyncio
import socket
import statistics
import threading
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from doctor.lab.scenarios import DEFAULT_SCENARIO, SCENARIOS, Scenario, get_scenario, start_lab
from doctor.lab.text import tokenize
from tests.support.lab_client import ROUTE_PATHS, Trace, stream_once

SYMPTOMS = {"healthy", "pre-first-token", "inter-token", "proxy-only"}


def test_registry_has_the_scenarios_the_demo_promises():
    assert set(SCENARIOS) >= {
        "healthy",
        "queueing",
        "kv-pressure",
        "prefill-interference",
        "proxy-buffering",
        "stream-compression",
        "gateway-serialisation",
    }
    assert DEFAULT_SCENARIO in SCENARIOS
    for name, scenario in SCENARIOS.items():
        assert scenario.name == name and scenario.description
        assert scenario.expect.symptom in SYMPTOMS
        assert (scenario.expect.setting is None) == (scenario.expect.symptom == "healthy")


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_payload_is_about_the_planned_size_on_the_planned_route(name: str):
    plan = get_scenario(name).probe
    body = plan.payload(nonce=3)
    assert body["stream"] is True
    text = body.get("prompt") or body.get("input") or body["messages"][0]["content"]
    assert abs(len(tokenize(text)) - plan.prompt_tokens) <= 4


def test_unknown_scenario_names_the_known_ones():
    with pytest.raises(KeyError, match="healthy"):
        get_scenario("nope")


def refused(url: str) -> bool:
    host, port = url.removeprefix("http://").split(":")
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


def test_start_lab_in_a_child_process_serves_and_stops(tmp_path: Path):
    with start_lab("healthy", tmp_path) as lab:
        for url in (lab.engine_url, lab.gateway_url):
            assert httpx.get(url + "/health", timeout=10).status_code == 200
        assert httpx.get(lab.gateway_url + "/v1/models", timeout=10).headers["server"] == "nginx (llm-doctor lab)"
        assert "vllm:kv_cache_usage_perc" in httpx.get(lab.metrics_url, timeout=10).text
        assert "KV cache size:" in lab.log_path.read_text()
    assert refused(lab.engine_url) and refused(lab.gateway_url)


def test_start_lab_in_threads_joins_them(tmp_path: Path):
    before = {t.name for t in threading.enumerate()}
    with start_lab(get_scenario("gateway-serialisation"), tmp_path, isolate=False) as lab:
        answer = httpx.post(
            lab.gateway_url + "/v1/completions", timeout=10, json={"prompt": "hi", "max_tokens": 3, "stream": True}
        )
        assert answer.text.endswith("data: [DONE]\n\n")
    assert {t.name for t in threading.enumerate() if t.name.startswith("lab-")} <= before
    assert refused(lab.engine_url) and refused(lab.gateway_url)


def test_start_lab_stops_with_streams_in_flight(tmp_path: Path):
    body = {"prompt": "hi", "max_tokens": 400, "stream": True}
    with (
        httpx.Client(timeout=10) as client,
        start_lab("kv-pressure", tmp_path, isolate=False) as lab,
        client.stream("POST", lab.gateway_url + "/v1/completions", json=body) as response,
    ):
        chunks = response.iter_raw()
        next(chunks)  # the stream is flowing
        lab.close()
        with pytest.raises(httpx.HTTPError):
            for _ in chunks:
                pass
    assert refused(lab.engine_url) and refused(lab.gateway_url)


# -- each scenario's signature, measured as the probe would: both paths at once -----------------


async def _both_paths(scenario: Scenario, engine_url: str, gateway_url: str) -> dict[str, list[Trace]]:
    plan = scenario.probe
    route = ROUTE_PATHS[plan.route]
    t0 = time.perf_counter()

    async def path(base: str, offset: int, client: httpx.AsyncClient) -> list[Trace]:
        slots = asyncio.Semaphore(plan.concurrency)

        async def one(i: int) -> Trace:
            async with slots:
                return await stream_once(client, base + route, plan.payload(nonce=offset + i), t0)

        return list(await asyncio.gather(*(one(i) for i in range(plan.requests))))

    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=64)) as client:
        direct, gateway = await asyncio.gather(path(engine_url, 0, client), path(gateway_url, 1000, client))
    return {"direct": direct, "gateway": gateway}


def _counter(url: str, name: str) -> float:
    text = httpx.get(url, timeout=10).text
    return sum(s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_signature(name: str, tmp_path: Path):
    scenario = get_scenario(name)
    with start_lab(scenario, tmp_path) as lab:
        before = {n: _counter(lab.metrics_url, n) for n in ("vllm:num_preemptions_total", "vllm:prompt_tokens_total")}
        runs = asyncio.run(_both_paths(scenario, lab.engine_url, lab.gateway_url))
        after = {n: _counter(lab.metrics_url, n) for n in before}
    direct, gateway = runs["direct"], runs["gateway"]
    every = direct + gateway
    assert all(len(t.tokens) == scenario.probe.max_tokens for t in every)
    stalled = [t for t in every if t.max_gap > 10 * t.median_gap]
    preempted = after["vllm:num_preemptions_total"] - before["vllm:num_preemptions_total"]
    if name == "healthy":
        assert preempted == 0 and all(t.events_per_read < 2 for t in every)
    elif name == "queueing":
        # Whole answers' worth of waiting before the first token, normal pace after it.
        for traces in (direct, gateway):
            assert max(t.ttft for t in traces) > 10 * max(t.tpot for t in traces)
        assert preempted == 0
    elif name == "kv-pressure":
        assert preempted > 0 and stalled
    elif name == "prefill-interference":
        own = sum(len(tokenize(scenario.probe.payload(0)["messages"][0]["content"])) for _ in every)
        assert stalled and preempted == 0
        assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] > 2 * own  # other users
    elif name == "proxy-buffering":
        assert min(t.events_per_read for t in gateway) > 10 * max(t.events_per_read for t in direct)
    elif name == "stream-compression":
        assert all(t.headers.get("content-encoding") == "gzip" and t.tokens[0] == t.tokens[-1] for t in gateway)
    elif name == "gateway-serialisation":  # waits before the first token, then flows token by token
        assert statistics.median(t.ttft for t in gateway) > 5 * statistics.median(t.ttft for t in direct)
        assert all(t.events_per_read < 2 for t in gateway)
    else:  # a new scenario needs its signature here
        pytest.fail(f"no signature for scenario {name}")
