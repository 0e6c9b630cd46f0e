"""The run record is completed from the evidence, the most direct source first."""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.collection.collector import CollectConfig
from doctor.collection.run_record import complete_run_record
from doctor.derive.log_facts import derive_log_facts
from doctor.evidence import (
    Endpoint,
    EndpointsEvidence,
    GpuDevice,
    GpuEvidence,
    HostEvidence,
    ModelInfo,
    NvLink,
)
from tests.support.bundles import bundle, log, request, stream

FIXTURES = Path(__file__).parents[2] / "fixtures" / "run_record"
SNAPSHOT = "/root/.cache/huggingface/hub/models--Qwen--Qwen2.5-7B-Instruct/snapshots/a09a35458c702b33eeacc393d103063234e8bc28"


def endpoints(*, root: str = "/srv/models/small-llama", gateway_version: str | None = "9.9.9") -> EndpointsEvidence:
    model = ModelInfo(id="small-llama", root=root, max_model_len=1024)
    return EndpointsEvidence([
        Endpoint(role="gateway", url="http://127.0.0.1:8080", version=gateway_version, models=[model]),
        Endpoint(role="engine", url="http://127.0.0.1:8000", version="0.32.0", models=[model]),
    ])


def h100s(n: int, *, nvlink: bool) -> GpuEvidence:
    devices = [GpuDevice(index=i, name="NVIDIA H100 80GB HBM3") for i in range(n)]
    links = [NvLink(gpu=0, link=0, active=True, remote_gpu=1), NvLink(gpu=1, link=0, active=True, remote_gpu=0)]
    return GpuEvidence(
        available=True, devices=devices, nvlinks=links if nvlink else [],
        topology={"0-1": "NVLINK" if nvlink else "SYS"} if n > 1 else {},
    )


def measured_stream(prompt_tokens: list[int]):
    requests = [request("direct", i, ttft=0.05, gaps=[0.03] * 3) for i in range(len(prompt_tokens))]
    for r, n in zip(requests, prompt_tokens, strict=True):
        r.prompt_tokens = n
    warm = request("direct", 99, ttft=0.5, gaps=[0.03], warmup=True)
    warm.prompt_tokens = 9999  # a warm-up never shapes the record
    return stream([warm, *requests], concurrency=4)


def test_everything_the_probes_learned_lands_in_the_record() -> None:
    b = bundle(
        endpoints=endpoints(),
        gpu=h100s(2, nvlink=True),
        host=HostEvidence(cpu_model="AMD EPYC 9654 96-Core Processor", cpu_sockets=2,
                          cpu_count_physical=192, cpu_count_logical=384),
        stream=measured_stream([250, 262, 255]),
    )
    b.run.provider, b.run.region = "aws", "eu-west-1"  # set from flags by the collector beforehand
    config = CollectConfig(engine="http://127.0.0.1:8000/v1", gateway="http://127.0.0.1:8080", model="small-llama")

    complete_run_record(b, config)

    run = b.run
    assert (run.model, run.served_model_name, run.vllm_version) == ("/srv/models/small-llama", "small-llama", "0.32.0")
    assert run.engine_config == {"max_model_len": 1024}
    assert (run.gpu_model, run.gpu_count, run.gpu_interconnect) == ("NVIDIA H100 80GB HBM3", 2, "nvlink")
    assert run.cpu_model == "AMD EPYC 9654 96-Core Processor"
    assert run.cpu_topology == "2 sockets x 96 cores, 384 threads"
    assert (run.route, run.concurrency, run.requests_per_path, run.warmup_per_path) == ("chat", 4, 3, 0)
    assert (run.prompt_tokens, run.max_tokens, run.arrival) == (255, 64, "closed-loop")
    assert run.metrics_url == "http://127.0.0.1:8000/metrics"
    assert (run.provider, run.region) == ("aws", "eu-west-1")
    assert run.model_revision is None


def test_payload_run_takes_its_shape_from_the_payload_and_the_server() -> None:
    b = bundle(stream=measured_stream([1800, 1790]))
    b.stream.shape.rate = 2.5  # what the probe ran
    config = CollectConfig(engine="http://e:8000", payload={"messages": [], "max_completion_tokens": 400},
                           prompt_tokens=256, max_tokens=64, rate=None)
    complete_run_record(b, config)
    assert (b.run.max_tokens, b.run.prompt_tokens) == (400, 1795)
    assert b.run.arrival == "poisson:2.5/s"


def test_payload_without_usage_leaves_prompt_length_unknown() -> None:
    b = bundle(stream=stream([request("gateway", 0, ttft=0.1, gaps=[0.1])]))
    complete_run_record(b, CollectConfig(gateway="http://g", payload={"prompt": "hi"}, prompt_tokens=256))
    assert b.run.prompt_tokens is None and b.run.max_tokens is None


def test_no_request_sent_records_no_load_shape() -> None:
    b = bundle(endpoints=endpoints())
    complete_run_record(b, CollectConfig(metrics=False))
    run = b.run
    assert (run.route, run.concurrency, run.prompt_tokens, run.max_tokens, run.arrival) == (None,) * 5
    assert run.metrics_url is None
    assert run.model == "/srv/models/small-llama"


@pytest.mark.parametrize(
    ("gpu", "expected"),
    [
        (h100s(2, nvlink=False), ("NVIDIA H100 80GB HBM3", 2, "pcie")),
        (h100s(1, nvlink=False), ("NVIDIA H100 80GB HBM3", 1, None)),
        (GpuEvidence(available=False, reason="NVML did not start: Driver Not Loaded"), (None, None, None)),
    ],
)
def test_gpu_interconnect(gpu: GpuEvidence, expected: tuple[object, ...]) -> None:
    b = bundle(gpu=gpu)
    complete_run_record(b, CollectConfig())
    assert (b.run.gpu_model, b.run.gpu_count, b.run.gpu_interconnect) == expected


@pytest.mark.parametrize(
    ("sockets", "cores", "threads", "expected"),
    [(1, 8, 16, "1 socket x 8 cores, 16 threads"), (None, 8, 16, "8 cores, 16 threads"), (None, None, 2, "2 threads"),
     (None, None, None, None)],
)
def test_cpu_topology(sockets: int | None, cores: int | None, threads: int | None, expected: str | None) -> None:
    b = bundle(host=HostEvidence(cpu_sockets=sockets, cpu_count_physical=cores, cpu_count_logical=threads))
    complete_run_record(b, CollectConfig())
    assert b.run.cpu_topology == expected


def test_revision_from_a_hugging_face_snapshot_path() -> None:
    b = bundle(endpoints=endpoints(root=SNAPSHOT))
    complete_run_record(b, CollectConfig(engine="http://e:8000"))
    assert b.run.model_revision == "a09a35458c702b33eeacc393d103063234e8bc28"
    assert b.run.model == SNAPSHOT


def test_gateway_version_is_not_the_engine_version() -> None:
    b = bundle(endpoints=EndpointsEvidence([Endpoint(role="gateway", url="http://g", version="1.2.3")]))
    complete_run_record(b, CollectConfig(gateway="http://g"))
    assert b.run.vllm_version is None


def test_the_startup_log_outranks_the_endpoints() -> None:
    """Real vLLM 0.32.0 startup log: version, model and the engine configuration it printed."""
    lines = (FIXTURES / "startup-0.32.0-cpu-default.log").read_text().splitlines()
    b = bundle(log=log(lines), endpoints=endpoints(root="/elsewhere", gateway_version=None))
    derive_log_facts(b)
    complete_run_record(b, CollectConfig(engine="http://e:8000"))
    run = b.run
    assert (run.vllm_version, run.engine_generation, run.model) == ("0.32.0", "V1", "/srv/models/tiny-llama")
    assert run.engine_config["gpu_memory_utilization"] == 0.5
    assert run.engine_config["max_model_len"] == 8192  # the log's value, not /v1/models'
    assert "vllm_version" not in run.engine_config and "model" not in run.engine_config


def test_revision_from_the_logged_non_default_args() -> None:
    """The same real log, as if started with ``--revision``: vLLM lists it among the non-default args."""
    lines = (FIXTURES / "startup-0.32.0-cpu-default.log").read_text().splitlines()
    (i,) = [n for n, line in enumerate(lines) if "non-default args: {" in line]
    lines[i] = lines[i].replace("'gpu_memory_utilization': 0.5}", "'gpu_memory_utilization': 0.5, 'revision': 'a09a354'}")
    b = bundle(log=log(lines))
    derive_log_facts(b)
    complete_run_record(b, CollectConfig())
    assert b.run.model_revision == "a09a354"
