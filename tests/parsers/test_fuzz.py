"""Property-based tests of every parser of untrusted input (hypothesis).

The property is always the same: whatever arrives, the parser answers with its result or its
own documented error (an evidence error, ``BundleError``, ``UsageError``...), never another
exception; and the bundle writer and reader are exact inverses of what the wire can carry.

The ``ci`` profile (the default) is bounded and deterministic: ``derandomize`` draws the same
examples on every run, ``max_examples`` keeps each parser to a few seconds on a slow machine,
and ``deadline=None`` because a shared CI core makes per-example times noise. Run a longer,
random search with ``HYPOTHESIS_PROFILE=fuzz``.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from doctor.bundle import EMBED_ID, EMBED_TYPE, dumps, load_path, save
from doctor.cli import app
from doctor.commands.log import log_command_output
from doctor.commands.metrics import metrics_command_output
from doctor.derive.gateway import derive_gateway
from doctor.engine_metrics.history import PRESENCE_PART, query_name, window_from_history
from doctor.engine_metrics.metric_names import FAMILIES, ExpositionError, parse_exposition
from doctor.engine_metrics.readings import NoWindow
from doctor.engine_readers import normal
from doctor.engine_readers.logs import parse_engine_log
from doctor.engine_readers.vllm import parse_lines
from doctor.engine_readers.vllm_lora import lora_slots
from doctor.engines import server_info
from doctor.evidence import PrometheusEvidence, PromQuery, RequestTrace, Scrape, TokenEvent
from doctor.foundation.errors import BundleError, UsageError
from doctor.foundation.serial import to_jsonable
from doctor.probes import endpoints, kubernetes
from doctor.probes.logfile import read_log
from doctor.probes.sse import InvalidUtf8, SseParser, classify
from doctor.settings import build_collect_config
from doctor.settings.config_file import FileConfig, load_config
from doctor.tracestores import ROUTES, TraceRoute
from doctor.tracestores.reading import BadAnswer, NotFound, NotThisRoute, read_answer
from tests.support import bundles

settings.register_profile(
    "ci", max_examples=60, deadline=None, derandomize=True, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.register_profile("fuzz", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# --- what the wire carries ---------------------------------------------------------------

#: Text with the characters that broke things: lone surrogates, controls, block elements, NUL.
wire_text = st.text(st.one_of(st.characters(), st.sampled_from("\ud800\udfff\x00\x1b█\n\r\t\"\\{}[]:,")), max_size=60)
numbers = st.one_of(
    st.integers(), st.integers(min_value=10**300, max_value=10**400), st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(), st.none(),
)
json_values = st.recursive(
    st.one_of(numbers, wire_text),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(wire_text, inner, max_size=4)),
    max_leaves=20,
)


def _json_text(value: object) -> str:
    try:
        return json.dumps(value)
    except ValueError:  # an int past the 4,300-digit limit: send the digits as they are
        return "1" + "0" * 5000


def _lines_with(*fragments: str) -> st.SearchStrategy[bytes]:
    """Log-like bytes: vLLM phrases, headers, junk and raw bytes, in any order."""
    pieces = st.one_of(
        st.sampled_from(fragments), wire_text, st.binary(max_size=40),
        st.sampled_from(["\n", "INFO 01-01 00:00:00 [api_server.py:1] ", "Error: ", "█" * 30, " " * 50, "7" * 40]),
    )
    return st.lists(pieces, max_size=40).map(lambda parts: b"".join(p if isinstance(p, bytes) else p.encode("utf-8", "surrogatepass") for p in parts))


# --- logs --------------------------------------------------------------------------------

LOG_PHRASES = (
    "vLLM API server version 0.9.0", "non-default args: {'max_num_seqs': 8, ", "args: Namespace(model='m', ",
    "# GPU blocks: 12, # CPU blocks: 4", "GPU KV cache size: 1,024 tokens", "Maximum concurrency for 2048 tokens per request: 3.2x",
    "Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: 1 reqs",
    "ValueError: The model's max seq len (4096) is larger than the maximum number of tokens that can be stored in KV cache (2048).",
    "Initializing a V1 LLM engine (v0.9.0) with config: model='m', max_seq_len=4096, ",
    'compilation_config={"cudagraph_capture_sizes":[512,504,', '"max_capture_size":512,', "max_cudagraph_capture_size': ",
    "Capping cudagraph capture sizes from max 512 to 352 to fit Mamba cache blocks",
    "structured_outputs_config=StructuredOutputsConfig(backend='xgrammar', ",
)


@given(_lines_with(*LOG_PHRASES))
def test_log_reader_and_parser_take_any_bytes(data: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as f:
        f.write(data)
    try:
        evidence, errors = read_log(f.name)
    finally:
        os.unlink(f.name)
    assert evidence is not None or errors
    if evidence is not None:
        facts = parse_lines(evidence.matched, f.name)
        json.dumps([line.text for line in evidence.matched], ensure_ascii=False).encode()  # writable
        assert facts is not None


ENGINE_LOG_PHRASES = (
    "[2025-11-06 01:22:10 DP1 TP1] ", "KV Cache is allocated. #tokens: 421472, K size: 28.94 GB, V size: ",
    "max_total_num_tokens=421472, chunked_prefill_size=-1, max_running_requests=", "server_args=ServerArgs(tp_size=",
    "Decode batch, #running-req: 6, #token: 1920, token usage: 0.94, #queue-req: ", "full token usage: 1e400, ",
    "KV cache pool is full. Retract requests. #retracted_reqs: 99999999999999999999", "llama_context: n_ctx = ",
    "llama_kv_cache: size =  544.00 MiB (  8192 cells, ", "srv          init: initializing slots, n_slots = 0",
    "new slot n_ctx_slot = ", "build: 4351 (4da69d1a) with",
    "INFO text_generation_launcher: Args { max_concurrent_requests: Some(", "Setting max batch total tokens to ",
    "[TensorRT-LLM][INFO] TRTGptModel maxNumSequences: ", "Allocated 78.30 GiB for max tokens in paged KV cache (",
)


@given(_lines_with(*ENGINE_LOG_PHRASES))
def test_other_engines_log_parsers_take_any_bytes(data: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".log", delete=False) as f:
        f.write(data)
    try:
        evidence, _errors = read_log(f.name)
    finally:
        os.unlink(f.name)
    if evidence is not None:
        facts = parse_engine_log(evidence.matched, f.name)
        json.dumps(normal.from_log(facts), allow_nan=True)


# --- /metrics ------------------------------------------------------------------------------

METRIC_LINES = (
    "# TYPE vllm:num_requests_running gauge\n", 'vllm:num_requests_running{model_name="m"} ',
    "vllm:gpu_cache_usage_perc ", 'vllm:time_to_first_token_seconds_bucket{le="', "+Inf", "NaN", "1e400",
    "1" + "0" * 310, "# HELP x y\n",
)


@given(_lines_with(*METRIC_LINES))
def test_exposition_parser_answers_samples_or_its_error(data: bytes) -> None:
    try:
        samples, _ = parse_exposition(data.decode("utf-8", "replace"))
    except ExpositionError:
        return
    assert all(math.isfinite(s.value) or math.isinf(s.value) for s in samples)


LORA_LINES = (
    "# TYPE vllm:lora_requests_info gauge\n", 'vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",',
    'waiting_lora_adapters="c"} 1.7e9\n', 'max_lora="x",', 'running_lora_adapters="",', "} NaN\n", "} 1e400\n", ",,",
)


@given(_lines_with(*LORA_LINES))
def test_lora_slots_read_any_scrape(data: bytes) -> None:
    scrape = Scrape(phase="during", t=0.0, wall=0.0, status=200, text=data.decode("utf-8", "replace"))
    for state in lora_slots([scrape]):
        assert state.max_lora is None or isinstance(state.max_lora, int)
        assert all(isinstance(a, str) and a for a in (*state.running, *state.waiting, *state.shut_out))


ROUTER_LINES = (
    "# TYPE vllm_router_processed_requests counter\n", 'vllm_router_processed_requests_total{worker="http://a:1"} 3\n',
    "# TYPE vllm_router_worker_health gauge\n", 'vllm_router_worker_health{worker="', "http://b:2", '"} 1\n', "} NaN\n",
    "} 1e400\n", "# TYPE smg_worker_cb_state gauge\n", 'smg_worker_cb_state{worker="x"} 2\n', "vllm_router_retries_total 5\n",
)


@given(_lines_with(*ROUTER_LINES), st.lists(wire_text, max_size=6), st.lists(wire_text, max_size=4), json_values)
def test_a_routers_evidence_reads_as_numbers_or_says_why(data: bytes, args: list[str], log: list[str], workers: object) -> None:
    from doctor.routers import RECORDS
    from doctor.routers.reading import read_scrape, scrape_problem, settings_in_use, worker_urls

    scrape = Scrape(phase="during", t=0.0, wall=0.0, status=200, text=data.decode("utf-8", "replace"))
    if scrape_problem(scrape) is None:
        for record in RECORDS:
            sample = read_scrape(scrape, record)
            assert all(math.isfinite(v) for slot in sample.per_replica.values() for v in slot.values())
    urls, why = worker_urls(_json_text(workers))
    assert all(u.startswith(("http://", "https://")) for u in urls) and (urls or why)
    for record in RECORDS:
        assert set(settings_in_use(record, args, log)) == set(record.settings)


# --- SSE -----------------------------------------------------------------------------------

SSE_PIECES = (
    "data: ", "\n\n", "event: response.output_text.delta\n", "data: [DONE]\n\n", ":ping\n\n",
    '{"choices":[{"index":0,"delta":{"content":"x"},"finish_reason":', '{"usage":{"prompt_tokens":',
    '"completion_tokens":', "true", "10000000000", "7", "null", "}]}", "}}", '"\\ud800"',
    '{"type":"response.completed","response":{"status":', '{"error":{"message":"boom"}}',
)


@given(_lines_with(*SSE_PIECES), st.integers(min_value=1, max_value=64))
def test_sse_parser_and_classifier_take_any_stream(data: bytes, read_size: int) -> None:
    parser = SseParser()
    try:
        for i in range(0, len(data), read_size):
            for event in parser.feed(data[i:i + read_size], float(i)):
                chunk = classify(event)
                assert chunk.finish_reason is None or isinstance(chunk.finish_reason, str)
                for count in (chunk.prompt_tokens, chunk.completion_tokens):
                    assert count is None or (type(count) is int and count >= 0)
                trace = RequestTrace(index=0, path="direct", finish_reason=chunk.finish_reason,
                                     completion_tokens=chunk.completion_tokens, text_excerpt=chunk.text[:200],
                                     error=chunk.error, tokens=[TokenEvent(t=event.t)])
                _round_trip_trace(trace)
    except InvalidUtf8:
        pass


def _round_trip_trace(trace: RequestTrace) -> None:
    bundle = bundles.bundle(stream=bundles.stream([trace]))
    with tempfile.TemporaryDirectory() as tmp:
        save(bundle, Path(tmp) / "b.json")
        again = load_path(Path(tmp) / "b.json").stream.requests[0]
    assert again.finish_reason == trace.finish_reason and again.completion_tokens == trace.completion_tokens


# --- Prometheus HTTP API answers -------------------------------------------------------------

api_rows = st.lists(st.one_of(
    json_values,
    st.fixed_dictionaries({"metric": st.one_of(json_values, st.dictionaries(st.sampled_from(["le", "model_name", "engine"]), json_values)),
                           "value": st.one_of(json_values, st.tuples(numbers, st.one_of(numbers, wire_text)).map(list))}),
    st.fixed_dictionaries({"metric": st.just({}), "values": st.lists(st.one_of(json_values, st.tuples(numbers, wire_text).map(list)))}),
), max_size=4)
api_answers = st.one_of(
    json_values.map(_json_text),
    api_rows.map(lambda rows: json.dumps({"status": "success", "data": {"resultType": "vector", "result": rows}}, allow_nan=True)),
    st.binary(max_size=30).map(lambda b: b.decode("latin-1")),
)


@given(st.lists(api_answers, min_size=1, max_size=6))
def test_prometheus_history_reads_any_answers(answers: list[str]) -> None:
    names = [query_name(f.key, PRESENCE_PART[f.kind], f.names[0]) for f in FAMILIES]
    names += [query_name(f.key, part, f.names[0]) for f in FAMILIES for part in ("bucket", "sum", "range", "min", "total_max")]
    queries = [PromQuery(name=names[i % len(names)], expr="x", response=a) for i, a in enumerate(answers * 8)]
    with contextlib.suppress(NoWindow):
        window_from_history(PrometheusEvidence(url="http://p", since_s=60.0, end_wall=1000.0, queries=queries))


# --- /version and /v1/models -------------------------------------------------------------------

@given(st.one_of(json_values.map(_json_text), st.sampled_from(['{"version":' * 3000, '{"data":[{"id":"\\ud800"}]}'])))
def test_version_and_models_answers_are_read_or_refused(body: str) -> None:
    answer = endpoints._Answer(200, "HTTP/1.1", httpx.Headers({"content-type": "application/json"}), body, 0.01)
    for read in (endpoints._read_version, endpoints._read_models):
        endpoint = endpoints.Endpoint(role="direct", url="http://e")
        try:
            read(endpoint, answer)
        except endpoints._Failure:
            continue
        json.dumps([endpoint.version, [m.id for m in endpoint.models]], ensure_ascii=False).encode()


# --- what an engine says about itself (/props, /get_server_info, /info, /slots) --------------------

_INFO_KEYS = sorted(set().union(*server_info.KEPT.values()) | {"n_ctx", "is_processing", "n_prompt_tokens", "next_token"})
engine_answers = st.one_of(json_values, st.dictionaries(st.sampled_from(_INFO_KEYS), st.one_of(
    json_values, st.lists(st.dictionaries(st.sampled_from([*_INFO_KEYS, "memory_usage", "token_capacity", "n_decoded"]),
                                          st.one_of(json_values, st.dictionaries(st.just("token_capacity"), numbers))),
                          max_size=3)), max_size=8))


@given(st.sampled_from(sorted(server_info.PATHS)), engine_answers, st.lists(engine_answers, max_size=3))
def test_engines_answers_about_themselves_give_facts_or_nothing(engine: str, doc: object, slots: list[object]) -> None:
    fields = server_info.kept_fields(engine, doc)
    if fields is not None:
        json.dumps(server_info.facts(engine, fields))
    kept = server_info.slot_fields(slots)
    usage = server_info.slots_kv_usage(kept) if kept is not None else None
    assert usage is None or 0.0 <= usage <= 1.0


# --- Kubernetes Service and EndpointSlices (k8s:// fleets) ------------------------------------------

slice_items = st.lists(st.one_of(json_values, st.fixed_dictionaries({
    "ports": st.one_of(json_values, st.lists(st.fixed_dictionaries({"name": st.sampled_from(["http", "", None]), "port": st.one_of(numbers, json_values)}))),
    "endpoints": st.one_of(json_values, st.lists(st.fixed_dictionaries({
        "addresses": st.one_of(json_values, st.lists(st.one_of(wire_text, json_values))),
        "conditions": st.one_of(json_values, st.fixed_dictionaries({"ready": st.one_of(st.booleans(), json_values)}))}))),
})), max_size=4)


@given(st.one_of(json_values, st.just({"spec": {"ports": [{"name": "http", "port": 8000}]}})),
       st.one_of(json_values, slice_items.map(lambda items: {"items": items})))
def test_endpoint_slices_give_urls_or_a_kube_error(service: object, slices: object) -> None:
    try:
        urls = kubernetes.ready_endpoints(service, slices, kubernetes.KubeService("ns", "svc", "8000"))
    except kubernetes.KubeError:
        return
    assert urls and all(httpx.URL(u).scheme == "http" for u in urls)


# --- gateway response headers (the gateway view) ---------------------------------------------------

header_names = st.one_of(wire_text, st.sampled_from([
    "server", "Via", "x-powered-by", "cf-ray", "x-amzn-trace-id", "x-kong-proxy-latency", "x-envoy-upstream-service-time",
    "x-litellm-overhead-duration-ms", "x-litellm-callback-duration-ms"]))
header_values = st.one_of(wire_text, st.sampled_from(["nginx", "uvicorn", "1.1 kong/3.6.0", "nan", "-1", "1e400", "12.5"]))


@given(st.lists(st.dictionaries(header_names, header_values, max_size=6), min_size=1, max_size=4),
       st.one_of(st.none(), wire_text))
def test_any_gateway_headers_name_a_gateway_or_none(responses: list[dict[str, str]], kind: str | None) -> None:
    reqs = [bundles.request("gateway", i, ttft=0.1, gaps=[0.01], start=i * 1.0, headers=h) for i, h in enumerate(responses)]
    stream = bundles.stream(reqs)
    stream.shape.gateway_kind = kind
    view = derive_gateway(bundles.bundle(stream=stream))
    assert isinstance(view.name, str) and (view.primary is None) == (view.family is None)
    assert all(math.isfinite(v) and v >= 0 for v in (view.litellm_overhead.min, view.litellm_overhead.max) if v is not None)
    json.dumps(to_jsonable(view), ensure_ascii=False).encode("utf-8", "surrogatepass")


# --- bundles and HTML reports ---------------------------------------------------------------------

@given(json_values)
def test_bundle_reader_answers_a_bundle_or_bundle_error(value: object) -> None:
    data = json.loads(dumps(bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.1, gaps=[0.01])]))))
    data["stream"]["requests"][0]["finish_reason"] = value
    data["run"]["labels"] = {"x": value}
    for text in (_json_text(value), json.dumps(data, allow_nan=True) if _json_text(value) != "1" + "0" * 5000 else "{}"):
        for wrap in (text, f'<html><script type="application/json" id="{EMBED_ID}">{text}</script>',
                     f'<html><script type="{EMBED_TYPE}" id="{EMBED_ID}">{text[:50]}'):
            with tempfile.TemporaryDirectory() as tmp:
                path = Path(tmp) / "b.html"
                path.write_text(wrap, encoding="utf-8", errors="surrogatepass")
                with contextlib.suppress(BundleError):
                    load_path(path)


@given(wire_text, st.floats(allow_nan=True, allow_infinity=True), st.integers(min_value=0, max_value=10**300))
def test_bundle_writer_and_reader_are_inverses(text: str, number: float, count: int) -> None:
    trace = bundles.request("direct", 0, ttft=0.1, gaps=[0.01])
    trace.text_excerpt, trace.error, trace.completion_tokens = text, text, count
    trace.headers = {text: text}
    bundle = bundles.bundle(stream=bundles.stream([trace]))
    bundle.stream.duration_s = number
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("b.json", "b.json.gz"):
            save(bundle, Path(tmp) / name)
            again = load_path(Path(tmp) / name)
            expected = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace") if any(
                "\ud800" <= c <= "\udfff" for c in text) else text
            got = again.stream.requests[0]
            assert got.text_excerpt.replace("\ufffd", "") == expected.replace("\ufffd", "")
            assert got.completion_tokens == count
            assert again.stream.duration_s == number or (math.isnan(again.stream.duration_s) and not math.isfinite(number))


# --- TOML config and --payload -------------------------------------------------------------------

TOML_PIECES = ("[probe]\n", "[budgets]\n", "ttft = ", "requests = ", "model = ", '"m"', "1" * 5000, "[" * 300,
               "nan", "inf", "-1", "\n", "[budgets.regions.eu]\n", '"\\ud800"', "[run]\n", ".".join(["a"] * 1000) + " = ")
#: A dotted key 1,000 parts deep: a table that deep, whose ``repr`` in the message once recursed past the limit.
DEEP_KEY = ("[run]\n" + ".".join(["a"] * 1000) + " = 1\n").encode()


@given(_lines_with(*TOML_PIECES))
@example(DEEP_KEY)
def test_config_file_is_a_config_or_a_usage_error(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_bytes(data)
        with contextlib.suppress(UsageError):
            load_config(path)


@given(st.one_of(json_values.map(_json_text), st.binary(max_size=40).map(lambda b: b.decode("latin-1")),
                 st.integers(min_value=1, max_value=600).map(lambda n: '{"a":' + "[" * n + "]" * n + "}")))
def test_payload_file_is_a_body_or_a_usage_error(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "p.json"
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
        try:
            config = build_collect_config({"payload": path, "engine": "http://127.0.0.1:9"}, FileConfig(), "collect")
        except UsageError:
            return
        assert isinstance(config.payload, dict)
        json.dumps(config.payload)  # what the probe will send


@pytest.mark.parametrize("profile", ["ci"])
def test_the_ci_profile_is_bounded_and_deterministic(profile: str) -> None:
    chosen = settings.get_profile(profile)
    assert chosen.derandomize and chosen.deadline is None and chosen.max_examples <= 100


# --- through the CLI's own entry points (issue 22 item 11) -----------------------------------------
#
# Each property drives a command the way a user does: `llm-doctor log FILE --json`, `metrics FILE
# [LATER] --json`, `analyze BUNDLE --html --json` and a config file named with `--config`, with the
# numbers that once crashed them (past int()'s 4,300 digits, past a float's range) and the runs that
# once took quadratic time. The answer is always the command's own: an exit code of 0, 1 or 2 with
# its document, never a traceback.

#: Numbers from outside that once crashed a parser or a renderer.
HOSTILE_NUMBERS = ("9" * 4400, "1" + "0" * 400, "1e400", "-1", "0", "nan", "inf", "1" * 40, "3.5")
#: Runs a once-quadratic path read from every position.
HOSTILE_RUNS = ("a" * 3000, "[REDACTED]a" * 200, "build info |" * 200, '\\"' * 1500)


def _cli_lines(*phrases: str, first: str = "", strict: bool = False) -> st.SearchStrategy[bytes]:
    """``first``, then lines that start with one of ``phrases`` and most often end in a hostile
    number or run, with junk between; ``strict``: no junk, each line ends after its value (a
    format where one bad line spoils the document: an exposition, TOML)."""
    ends = [""] if strict else ["", " ", ", ", " tokens", ")", "%", " reqs, "]
    stated = st.tuples(st.sampled_from(phrases), st.sampled_from(HOSTILE_NUMBERS + HOSTILE_RUNS),
                       st.sampled_from(ends)).map(lambda t: "\n" + "".join(t))
    parts = st.one_of(stated) if strict else st.one_of(stated, stated, stated, st.sampled_from(phrases), wire_text)
    return st.lists(parts, max_size=12).map(lambda got: (first + "".join(got) + "\n").encode("utf-8", "surrogatepass"))


#: engine -> (its first line, the starts of its lines that hold a number), in its own format.
CLI_LOGS: dict[str, tuple[str, tuple[str, ...]]] = {
    "vllm": ("INFO 01-01 00:00:00 [api_server.py:1] vLLM API server version 0.9.0", (
        "INFO 01-01 00:00:02 [kv_cache_utils.py:1] GPU KV cache size: ",
        "INFO 01-01 00:00:02 [kv_cache_utils.py:1] Maximum concurrency for ",
        "INFO 01-01 00:00:03 [loggers.py:1] Engine 000: Avg prompt throughput: ",
        "INFO 01-01 00:00:03 [loggers.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, Running: ",
        "INFO 01-01 00:00:03 [loggers.py:1] Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: 2.0 tokens/s, GPU KV cache usage: ",
        "INFO 01-01 00:00:01 [core.py:1] Initializing a V1 LLM engine (v0.9.0) with config: model='m', max_seq_len=",
        "INFO 01-01 00:00:01 [api_server.py:1] non-default args: {'max_num_seqs': ",
        "INFO 01-01 00:00:01 [worker.py:1] # GPU blocks: ", "INFO 01-01 00:00:01 [worker.py:1] authorization: ")),
    "llama.cpp": ("llama_context: n_batch = 2048", (
        "llama_context: n_ctx = ", "llama_kv_cache: size = ", "llama_kv_cache: size = 1.00 MiB ( ",
        "srv          init: initializing slots, n_slots = ", "INFO [            main] build info | build=",
        "INFO [            main] build info |")),
    "sglang": ("[2025-11-06 01:22:10 TP0] max_total_num_tokens=1, chunked_prefill_size=8192, max_running_requests=48, ", (
        "[2025-11-06 01:22:10 TP0] KV Cache is allocated. #tokens: ", "[2025-11-06 01:22:10 TP0] max_total_num_tokens=",
        "[2025-11-06 01:22:10 TP0] KV Cache is allocated. #tokens: 1, K size: ",
        "[2025-11-06 01:22:11 TP0] KV cache pool is full. Retract requests. #retracted_reqs: ",
        "[2025-11-06 01:22:12 TP0] Decode batch, #running-req: ", "[2025-11-06 01:22:12 TP0] max_running_requests is capped to ")),
    "tgi": ("2024-01-01T00:00:00Z  INFO text_generation_launcher: Args { max_total_tokens: 4096 }", (
        "2024-01-01T00:00:00Z  INFO text_generation_launcher: Args { max_concurrent_requests: ",
        "2024-01-01T00:00:00Z  INFO text_generation_launcher: Args { cuda_memory_fraction: ",
        "2024-01-01T00:00:00Z  INFO text_generation_launcher: Args { ",
        "2024-01-01T00:00:01Z  INFO text_generation_router: router/src/main.rs:1: Setting max batch total tokens to ")),
    "tensorrt-llm": ("[TensorRT-LLM][INFO] TRTGptModel maxSequenceLen: 4096", (
        "[TensorRT-LLM][INFO] TRTGptModel maxNumSequences: ", "[TensorRT-LLM][INFO] Number of tokens per block: ",
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated ", "[TensorRT-LLM][INFO] Using ")),
}


@given(st.sampled_from(sorted(CLI_LOGS)).flatmap(lambda e: _cli_lines(*CLI_LOGS[e][1], first=CLI_LOGS[e][0])))
def test_log_command_answers_any_log(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "engine.log"
        path.write_bytes(data)
        output = log_command_output(str(path), as_json=True)
    assert output.code in (0, 1, 2)
    if output.text:
        json.loads(output.text)


CLI_METRIC_PHRASES = (
    "sglang:max_total_num_tokens ", "sglang:max_running_requests ", "sglang:context_len ", "trtllm_kv_cache_max_blocks ",
    'vllm:cache_config_info{block_size="', 'vllm:num_requests_waiting{model_name="', "vllm:num_requests_running ",
    "vllm:gpu_cache_usage_perc ", 'vllm:time_to_first_token_seconds_bucket{le="', "vllm:time_to_first_token_seconds_count ",
)


@given(st.lists(st.one_of(_cli_lines(*CLI_METRIC_PHRASES, first="sglang:num_running_reqs 1"),
                           _cli_lines(*CLI_METRIC_PHRASES, first="sglang:num_running_reqs 1", strict=True)), min_size=1, max_size=2))
def test_metrics_command_answers_any_scrapes(scrapes: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, data in enumerate(scrapes):
            paths.append(Path(tmp) / f"s{i}.prom")
            paths[-1].write_bytes(data)
        try:
            text, code = metrics_command_output([str(p) for p in paths], as_json=True)
        except UsageError:
            return  # an unusable scrape is one line on stderr and exit 2 (the command's way), no traceback
    assert code in (0, 2)
    json.loads(text)


#: Values a bundle can hold in a number's place: huge integers (up to JSON's 4,300 digits), negative ones.
bundle_numbers = st.one_of(st.integers(min_value=-5, max_value=50), st.integers(min_value=10**18, max_value=10**400),
                           st.floats(min_value=-1e300, max_value=1e300, allow_nan=False))


@settings(max_examples=min(settings.default.max_examples, 25))
@given(st.lists(st.tuples(st.sampled_from(["tokens", "completion_tokens", "prompt_tokens", "events", "nbytes", "t", "status"]),
                          bundle_numbers), min_size=1, max_size=6))
def test_analyze_renders_a_bundle_of_any_numbers(changes: list[tuple[str, object]]) -> None:
    """`analyze BUNDLE --html --json`: what a hand-edited or hostile bundle holds in a number's place."""
    reqs = [bundles.request("direct", i, ttft=0.1, gaps=[0.01] * 4, start=float(i)) for i in range(3)]
    data = json.loads(dumps(bundles.bundle(stream=bundles.stream(reqs))))
    for i, (field, value) in enumerate(changes):
        req = data["stream"]["requests"][i % 3]
        if field in ("tokens", "t"):
            req["tokens"][i % 5][field] = value
        elif field in ("events", "nbytes"):
            req["reads"][i % 5][field] = value
        else:
            req[field] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "b.json"
        path.write_text(json.dumps(data))
        result = CliRunner().invoke(app, ["analyze", str(path), "--html", str(Path(tmp) / "r.html"), "--json", str(Path(tmp) / "r.json")])
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        assert result.exit_code in (0, 1, 2), result.output
        if result.exit_code != 2:
            assert (Path(tmp) / "r.html").is_file() and json.loads((Path(tmp) / "r.json").read_text())["verdict"]


#: Config files whose tables and keys are right and whose values are hostile, then any lines at all.
config_files = st.one_of(
    st.tuples(st.sampled_from(["budgets", "budgets.regions.eu"]), st.sampled_from((*HOSTILE_NUMBERS, "0.5")),
              st.sampled_from((*HOSTILE_NUMBERS, "0.05"))).map(lambda t: f"[{t[0]}]\nttft = {t[1]}\ntpot = {t[2]}\n".encode()),
    st.tuples(st.sampled_from(HOSTILE_NUMBERS), st.sampled_from(HOSTILE_NUMBERS)).map(
        lambda t: f"[probe]\nrequests = {t[0]}\nduration = {t[1]}\n".encode()),
    st.sampled_from(["[budgets]", "[probe]"]).flatmap(
        lambda table: _cli_lines("ttft = ", "tpot = ", "requests = ", "duration = ", first=table, strict=True)),
)


@settings(max_examples=min(settings.default.max_examples, 25))
@given(config_files)
def test_analyze_with_any_config_file_answers_or_exits_2(data: bytes) -> None:
    """`analyze BUNDLE --config FILE`: a config the schema accepts analyses; any other is exit 2, one line."""
    with tempfile.TemporaryDirectory() as tmp:
        config, bundle_path = Path(tmp) / "c.toml", Path(tmp) / "b.json"
        config.write_bytes(data)
        save(bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.1, gaps=[0.01])])), bundle_path)
        result = CliRunner().invoke(app, ["analyze", str(bundle_path), "--config", str(config)])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert result.exit_code in (0, 1, 2), result.output


# --- autoscaler objects ---------------------------------------------------------------------

SCALER_LINES = (
    "apiVersion: autoscaling/v2\n", "apiVersion: keda.sh/v1alpha1\n", "apiVersion: serving.knative.dev/v1\n",
    "kind: HorizontalPodAutoscaler\n", "kind: ScaledObject\n", "kind: Service\n", "kind: List\nitems:\n", "kind: PodAutoscaler\n",
    "spec:\n", "  minReplicas: 0\n", "  maxReplicas: ${MAX}\n", "  minReplicaCount: x\n", "  metrics:\n  - type: Pods\n",
    "    pods: {metric: {name: vllm:num_requests_waiting}, target: {type: AverageValue, averageValue: 4}}\n",
    "  triggers:\n  - type: prometheus\n    metadata: {query: 'sum(rate(x_total[1m]', threshold: '5'}\n",
    "    annotations: {autoscaling.knative.dev/min-scale: '0'}\n", "applications:\n- deployments:\n  - autoscaling_config: {}\n",
    "---\n", "&a [x, *a]\n", "{{ .Values.x }}\n", "- ", "  ", ": ", "[", "{",
)


@given(_lines_with(*SCALER_LINES))
def test_the_scaler_reader_reads_any_text_or_says_why_not(data: bytes) -> None:
    """Autoscaler manifests from outside: objects read into scalers, or one ManifestError, never a traceback."""
    from doctor.scalers import read_documents
    from doctor.scalers.manifests import ManifestError, documents

    try:
        docs = documents(data.decode("utf-8", errors="replace"), "fuzz.yaml")
    except ManifestError:
        return
    view = read_documents(docs)
    assert not any("could not be read" in p for p in view.problems), view.problems
    for scaler in view.scalers:
        assert scaler.label and all(s.path for s in scaler.signals)


# -- the eval gate: prompts files, recorded answers, answers and prompt log-probabilities ------------

_ANSWER_SHAPES = st.one_of(
    json_values,
    st.fixed_dictionaries({"model": json_values, "usage": json_values, "prompt_logprobs": json_values, "choices": st.lists(
        st.fixed_dictionaries({"text": json_values, "finish_reason": json_values, "prompt_logprobs": json_values,
                               "message": st.one_of(json_values, st.fixed_dictionaries(
                                   {"content": json_values, "tool_calls": st.lists(st.one_of(json_values, st.fixed_dictionaries(
                                       {"function": st.fixed_dictionaries({"name": json_values, "arguments": json_values})})))}))}),
        max_size=2)}),
)


@given(_ANSWER_SHAPES, st.sampled_from(["chat", "completions"]), st.integers(0, 5))
def test_answers_and_prompt_logprobs_are_read_or_refused(doc, route, tokens) -> None:
    from doctor.probes.answers import reference_scores
    from doctor.verify.answers import answer_from_response

    answer = answer_from_response("p", route, doc)
    assert isinstance(answer.text, str) and (answer.ok or answer.error)
    assert isinstance((answer.json_valid(), answer.tools(), answer.repeating), tuple)  # each must not raise
    scores = reference_scores(doc, route, tokens or 1)
    assert scores is None or len(scores.tokens) == len(scores.logprobs)


@given(st.lists(st.one_of(json_values.map(json.dumps), wire_text), max_size=4))
def test_prompts_and_recorded_answers_files_are_read_or_named(lines) -> None:
    from doctor.verify.prompts import PromptFileError, parse_prompts
    from doctor.verify.record import load

    text = "\n".join(lines)
    with contextlib.suppress(PromptFileError):
        assert parse_prompts(text, "f.jsonl")
    with contextlib.suppress(ValueError):
        load(text, "a.jsonl")


# --- a trace store's answers (--traces) -----------------------------------------------------

_STORE_ROUTES = [route for _, route in ROUTES]
_SPAN_KEYS = st.sampled_from(["traceId", "spanId", "parentSpanId", "startTimeUnixNano", "endTimeUnixNano", "kind", "status",
                              "attributes", "traceID", "spanID", "startTime", "duration", "tags", "references", "processID"])
_span_like = st.dictionaries(_SPAN_KEYS, json_values, max_size=6)


def _store_answer(route: TraceRoute, spans: object, outer: object) -> str:
    """An answer of the route's shape around fuzzed spans, or any JSON at all (``outer``)."""
    if route.answer == "otlp":
        tree: object = {route.spans_key: [{"scopeSpans": [{"spans": spans}]}]}
    else:
        tree = {route.spans_key: [{"spans": spans, "processes": outer}]}
    return _json_text({route.wrapper: tree} if route.wrapper else tree)


@given(st.sampled_from(_STORE_ROUTES), st.sampled_from([200, 404]),
       st.one_of(st.lists(_span_like, max_size=3), json_values), json_values, st.booleans())
def test_a_trace_stores_answer_is_spans_or_says_why_not(route: TraceRoute, status: int, spans: object, outer: object, shaped: bool) -> None:
    text = _store_answer(route, spans, outer) if shaped else _json_text(outer)
    with contextlib.suppress(NotFound, NotThisRoute, BadAnswer):
        for span in read_answer(route, status, text):
            assert isinstance(span.trace_id, str) and isinstance(span.start_ns, int)
