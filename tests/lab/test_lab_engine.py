"""The lab engine over real HTTP on 127.0.0.1: vLLM 0.32's wire shapes, /metrics, the log."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from doctor.lab.engine import LabEngine
from doctor.lab.scheduler import EngineConfig

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
ROUTES = {"completions": "/v1/completions", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
CONFIG = EngineConfig(max_model_len=4096, kv_cache_tokens=65536, max_num_seqs=32, stats_interval_s=0.1)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory):
    lab = LabEngine(CONFIG, log_path=tmp_path_factory.mktemp("engine") / "vllm.log")
    lab.start()
    yield lab
    lab.stop()


def body_for(route: str, max_tokens: int = 6, **extra: Any) -> dict[str, Any]:
    text = "say something about latency"
    if route == "completions":
        base = {"prompt": text, "max_tokens": max_tokens}
    elif route == "chat":
        base = {"messages": [{"role": "user", "content": text}], "max_tokens": max_tokens}
    else:
        base = {"input": text, "max_output_tokens": max_tokens}
    return {"model": CONFIG.model, "stream": True, **base, **extra}


def raw_chunks(url: str, path: str, body: dict[str, Any], version: str = "1.1") -> tuple[str, list[bytes]]:
    """POST over a plain socket; the response head and every HTTP chunk exactly as framed."""
    host, port = url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            f"POST {path} HTTP/{version}\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
            + payload
        )
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    chunks = []
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        chunks.append(rest[:size])
        rest = rest[size + 2 :]
    return head.decode(), chunks


def sse_events(text: bytes | str) -> list[tuple[str | None, Any]]:
    """(event name, parsed data) per SSE event; ``[DONE]`` kept as the string."""
    if isinstance(text, bytes):
        text = text.decode()
    out = []
    for block in text.split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = None
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data = line[6:]
        out.append((name, data if data == "[DONE]" else json.loads(data)))
    return out


def shape(value: Any) -> Any:
    """The structure of a JSON value: keys in order, value kinds, first list element."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    if value is None:
        return None
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def fixture_events(route: str) -> list[tuple[str | None, Any]]:
    return sse_events((FIXTURES / "sse" / f"{route}.sse").read_text())


# -- framing -------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1.1", "1.0"])
@pytest.mark.parametrize("route", list(ROUTES))
def test_each_sse_event_is_its_own_http_chunk(engine: LabEngine, route: str, version: str):
    # HTTP/1.0 too, as uvicorn answers nginx's default upstream requests (raw-http10-vllm.txt).
    head, chunks = raw_chunks(engine.url, ROUTES[route], body_for(route), version)
    assert head.startswith("HTTP/1.1 200")
    assert re.search(r"(?im)^transfer-encoding: chunked\r?$", head)
    assert re.search(r"(?im)^content-type: text/event-stream; charset=utf-8\r?$", head)
    assert len(chunks) > 6
    for chunk in chunks:
        assert chunk.endswith(b"\n\n") and chunk.count(b"\n\n") == 1, chunk


# -- shapes against the real vLLM samples -----------------------------------------------------


def test_completions_chunks_match_real_vllm(engine: LabEngine):
    real = fixture_events("completions")
    _, chunks = raw_chunks(
        engine.url, "/v1/completions", body_for("completions", stream_options={"include_usage": True})
    )
    lab = sse_events(b"".join(chunks))
    assert shape(lab[0][1]) == shape(real[0][1])  # a token chunk
    final_real = next(d for _, d in real if d != "[DONE]" and d["choices"] and d["choices"][0]["finish_reason"])
    final_lab = next(d for _, d in lab if d != "[DONE]" and d["choices"] and d["choices"][0]["finish_reason"])
    assert shape(final_lab) == shape(final_real)
    assert shape(lab[-2][1]) == shape(real[-2][1])  # the usage trailer: choices [] and usage
    assert lab[-2][1]["choices"] == [] and lab[-2][1]["usage"]["completion_tokens"] == 6
    assert lab[-1][1] == real[-1][1] == "[DONE]"


def test_chat_starts_with_a_role_only_chunk_like_real_vllm(engine: LabEngine):
    real = fixture_events("chat")
    _, chunks = raw_chunks(engine.url, "/v1/chat/completions", body_for("chat", stream_options={"include_usage": True}))
    lab = sse_events(b"".join(chunks))
    assert lab[0][1]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert shape(lab[0][1]) == shape(real[0][1])
    assert shape(lab[1][1]) == shape(real[1][1])
    assert lab[1][1]["choices"][0]["delta"]["content"]
    assert shape(lab[-3][1]) == shape(real[-3][1])  # the last token, finish_reason "length"
    assert lab[-3][1]["choices"][0]["finish_reason"] == "length"
    assert shape(lab[-2][1]) == shape(real[-2][1])
    assert lab[-1][1] == "[DONE]"


def test_responses_events_match_real_vllm_and_close_with_completed(engine: LabEngine):
    real = fixture_events("responses")
    _, chunks = raw_chunks(engine.url, "/v1/responses", body_for("responses"))
    lab = sse_events(b"".join(chunks))
    names = [name for name, _ in lab]
    assert (
        names[:5]
        == [name for name, _ in real][:5]
        == [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
        ]
    )
    for (lab_name, lab_data), (real_name, real_data) in zip(lab[:5], real[:5], strict=True):
        assert lab_data["type"] == lab_name == real_name
        assert shape(lab_data) == shape(real_data), lab_name
    assert names[-4:] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [d["sequence_number"] for _, d in lab] == list(range(len(lab)))
    text = "".join(d["delta"] for n, d in lab if n == "response.output_text.delta")
    assert lab[-4][1]["text"] == text
    completed = lab[-1][1]["response"]
    assert completed["status"] == "completed" and completed["usage"]["output_tokens"] == 6
    assert shape({**completed, "output": [], "usage": None, "status": "x"}) == shape(
        {**real[0][1]["response"], "output": [], "usage": None, "status": "x"}
    )


def test_continuous_usage_stats_count_every_chunk(engine: LabEngine):
    opts = {"include_usage": True, "continuous_usage_stats": True}
    _, chunks = raw_chunks(engine.url, "/v1/chat/completions", body_for("chat", max_tokens=5, stream_options=opts))
    events = [d for _, d in sse_events(b"".join(chunks)) if d != "[DONE]" and d["choices"]]
    assert [e["usage"]["completion_tokens"] for e in events] == [0, 1, 2, 3, 4, 5]


def test_stream_interval_bundles_tokens_per_chunk(tmp_path: Path):
    lab = LabEngine(EngineConfig(stream_interval=4))
    lab.start()
    try:
        opts = {"include_usage": True, "continuous_usage_stats": True}
        _, chunks = raw_chunks(lab.url, "/v1/completions", body_for("completions", max_tokens=13, stream_options=opts))
    finally:
        lab.stop()
    events = [d for _, d in sse_events(b"".join(chunks)) if d != "[DONE]" and d["choices"]]
    # The first token alone (as vLLM sends it), then groups of 4, the rest at the finish.
    assert [e["usage"]["completion_tokens"] for e in events] == [1, 5, 9, 13]


def test_non_streamed_answers(engine: LabEngine):
    with httpx.Client(base_url=engine.url, timeout=10) as client:
        chat = client.post("/v1/chat/completions", json=body_for("chat", stream=False)).json()
        completion = client.post("/v1/completions", json=body_for("completions", stream=False)).json()
        response = client.post("/v1/responses", json=body_for("responses", stream=False)).json()
    assert chat["object"] == "chat.completion" and chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["completion_tokens"] == 6 and chat["choices"][0]["finish_reason"] == "length"
    assert completion["object"] == "text_completion" and completion["choices"][0]["text"]
    assert response["object"] == "response" and response["status"] == "completed"


def test_output_is_reproducible_across_engines():
    def texts() -> list[str]:
        lab = LabEngine(CONFIG)
        lab.start()
        try:
            with httpx.Client(base_url=lab.url, timeout=10) as client:
                return [
                    client.post("/v1/completions", json=body_for("completions", stream=False)).json()["choices"][0][
                        "text"
                    ]
                    for _ in range(3)
                ]
        finally:
            lab.stop()

    first = texts()
    assert first == texts() and all(t.strip() for t in first)


# -- other routes and errors -------------------------------------------------------------------


def test_models_version_health(engine: LabEngine):
    with httpx.Client(base_url=engine.url, timeout=10) as client:
        models = client.get("/v1/models").json()
        assert models["data"][0]["id"] == CONFIG.model
        assert models["data"][0]["max_model_len"] == CONFIG.max_model_len
        assert client.get("/version").json() == {"version": "0.32.0"}
        assert client.get("/health").status_code == 200
        assert client.get("/nope").status_code == 404


def test_bad_requests_get_vllm_error_objects(engine: LabEngine):
    with httpx.Client(base_url=engine.url, timeout=10) as client:
        too_long = client.post("/v1/completions", json=body_for("completions", max_tokens=CONFIG.max_model_len))
        wrong_model = client.post("/v1/completions", json={**body_for("completions"), "model": "other"})
        not_json = client.post("/v1/completions", content=b"{", headers={"content-type": "application/json"})
    assert too_long.status_code == 400 and "maximum context length" in too_long.json()["error"]["message"]
    assert wrong_model.status_code == 404 and wrong_model.json()["error"]["code"] == 404
    assert not_json.status_code == 400


# -- /metrics ----------------------------------------------------------------------------------


V1_FAMILIES = [
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:num_preemptions",
    "vllm:prompt_tokens",
    "vllm:generation_tokens",
    "vllm:request_success",
    "vllm:time_to_first_token_seconds",
    "vllm:inter_token_latency_seconds",
    "vllm:request_queue_time_seconds",
    "vllm:request_prefill_time_seconds",
    "vllm:request_decode_time_seconds",
    "vllm:e2e_request_latency_seconds",
    "vllm:prefix_cache_queries",
    "vllm:prefix_cache_hits",
    "vllm:iteration_tokens_total",
    "vllm:request_time_per_output_token_seconds",
]


def families(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def test_metrics_have_vllm_v1_names_types_buckets_and_labels(engine: LabEngine):
    with httpx.Client(base_url=engine.url, timeout=10) as client:
        client.post("/v1/completions", json=body_for("completions", stream=False))
        lab = families(client.get("/metrics").text)
    real = families((FIXTURES / "metrics" / "0.32.0-cpu-after-load.prom").read_text())
    for name in V1_FAMILIES:
        assert lab[name].type == real[name].type, name
        lab_buckets = [s.labels["le"] for s in lab[name].samples if s.name.endswith("_bucket")]
        real_buckets = [s.labels["le"] for s in real[name].samples if s.name.endswith("_bucket")]
        assert lab_buckets[: len(real_buckets)] == real_buckets, name
        for sample in lab[name].samples:
            assert sample.labels["engine"] == "0" and sample.labels["model_name"] == CONFIG.model
    reasons = {s.labels["finished_reason"] for s in lab["vllm:request_success"].samples if s.name.endswith("_total")}
    assert reasons == {
        s.labels["finished_reason"] for s in real["vllm:request_success"].samples if s.name.endswith("_total")
    }


def test_metrics_count_what_was_served(engine: LabEngine):
    def counters() -> dict[str, float]:
        text = httpx.get(engine.url + "/metrics", timeout=10).text
        return {
            s.name: s.value
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name in ("vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count")
        }

    before = counters()
    httpx.post(engine.url + "/v1/completions", json=body_for("completions", max_tokens=7, stream=False), timeout=10)
    after = counters()
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] == 7
    assert after["vllm:time_to_first_token_seconds_count"] - before["vllm:time_to_first_token_seconds_count"] == 1


# -- the log ------------------------------------------------------------------------------------

VLLM_PREFIX = re.compile(
    r"^\((APIServer|EngineCore|Worker) pid=\d+\) (INFO|WARNING) \d\d-\d\d \d\d:\d\d:\d\d \[[\w.]+:\d+\] "
)
KV_LINE = re.compile(
    r"GPU KV cache size: ([\d,]+) tokens, Maximum concurrency for ([\d,]+) tokens per request: (\d+\.\d\d)x"
)


def test_log_lines_have_vllm_032_format(engine: LabEngine):
    import time

    deadline = time.monotonic() + 30  # at least one periodic stats line: polled, a loaded machine is late
    while "Avg prompt throughput: " not in engine.log.path.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    lines = engine.log.path.read_text().splitlines()
    assert lines and all(VLLM_PREFIX.match(line) for line in lines)
    real = (FIXTURES / "logs" / "startup-0.32.0-cpu-default.log").read_text().splitlines()
    for needle in (
        "non-default args: {",
        "Initializing a V1 LLM engine (v0.32.0) with config: ",
        "KV cache size: ",
        "Engine 000: Avg prompt throughput: ",
    ):
        lab_line = next(line for line in lines if needle in line)
        real_line = next(line for line in real if needle in line)
        assert VLLM_PREFIX.match(real_line)
        # Same text before the needle, but for the device: the lab presents a GPU, the sample was a CPU.
        lab_head = VLLM_PREFIX.sub("", lab_line).split(needle)[0].replace("GPU", "CPU")
        assert lab_head == VLLM_PREFIX.sub("", real_line).split(needle)[0]
    kv = next(KV_LINE.search(line) for line in lines if KV_LINE.search(line))
    assert int(kv.group(1).replace(",", "")) == CONFIG.kv_cache_tokens
    assert int(kv.group(2).replace(",", "")) == CONFIG.max_model_len
    assert float(kv.group(3)) == pytest.approx(CONFIG.kv_cache_tokens / CONFIG.max_model_len, abs=0.01)
    args = next(line for line in lines if "non-default args" in line)
    assert "'max_num_seqs': 32" in args and "'max_model_len': 4096" in args
