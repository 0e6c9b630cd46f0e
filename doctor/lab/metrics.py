"""The lab engine's /metrics: vLLM V1 names, types, help texts and histogram buckets.

Built with prometheus_client (as vLLM itself does) on a private registry per engine, so two labs
in one process do not share counters. Names, buckets and labels are those of a real vLLM 0.32
scrape (fixtures/metrics/0.32.0-cpu-after-load.prom); only the families the lab can fill with
meaning are exported.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from doctor.lab.scheduler import Counters, EngineConfig, Sequence

CONTENT_TYPE = CONTENT_TYPE_LATEST

_TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000)
_TTFT_BUCKETS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
_ITL_BUCKETS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
_REQUEST_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
)
_ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
_PREEMPTION_BUCKETS = (1, 2, 3, 4, 5, 10, 20)
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
LABELS = ("engine", "model_name")


class EngineMetrics:
    """The lab engine's vLLM-named Prometheus families on a private registry, fed by the engine loop
    after each step and request, so the metrics checks read the lab as they read a real vLLM.
    """

    def __init__(self, config: EngineConfig) -> None:
        self.registry = CollectorRegistry()
        self._labels = {"engine": "0", "model_name": config.model}
        reg = self.registry

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, LABELS, registry=reg).labels(**self._labels)

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, LABELS, registry=reg).labels(**self._labels)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=reg).labels(**self._labels)

        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.prompt_tokens_cached = counter(
            "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external)."
        )
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        self._mirrored = {
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.prompt_tokens_cached,
            "generation_tokens": self.generation_tokens,
            "preemptions": self.preemptions,
            "prefix_queries": self.prefix_queries,
            "prefix_hits": self.prefix_hits,
        }
        self._seen: dict[str, int] = {}
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            (*LABELS, "finished_reason"),
            registry=reg,
        )
        self.success = {r: success.labels(finished_reason=r, **self._labels) for r in FINISHED_REASONS}
        self.request_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", _TOKEN_BUCKETS
        )
        self.request_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", _TOKEN_BUCKETS
        )
        self.iteration_tokens = histogram(
            "vllm:iteration_tokens_total", "Histogram of number of tokens per engine_step.", _ITERATION_BUCKETS
        )
        self.request_max_tokens = histogram(
            "vllm:request_params_max_tokens", "Histogram of the max_tokens request parameter.", _TOKEN_BUCKETS
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", _TTFT_BUCKETS
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", _ITL_BUCKETS
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            _ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", _REQUEST_BUCKETS
        )
        self.queue_time = histogram(
            "vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", _REQUEST_BUCKETS
        )
        self.inference_time = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            _REQUEST_BUCKETS,
        )
        self.prefill_time = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            _REQUEST_BUCKETS,
        )
        self.decode_time = histogram(
            "vllm:request_decode_time_seconds", "Histogram of time spent in DECODE phase for request.", _REQUEST_BUCKETS
        )
        self.request_preemptions = histogram(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            _PREEMPTION_BUCKETS,
        )
        Gauge(
            "vllm:cache_config_info",
            "Information of the LLMEngine CacheConfig",
            (
                "block_size",
                "enable_prefix_caching",
                "engine",
                "gpu_memory_utilization",
                "kv_cache_size_tokens",
                "num_gpu_blocks",
            ),
            registry=reg,
        ).labels(
            block_size=str(config.block_size),
            enable_prefix_caching=str(config.enable_prefix_caching),
            engine="0",
            gpu_memory_utilization=str(config.gpu_memory_utilization),
            kv_cache_size_tokens=str(config.kv_cache_tokens),
            num_gpu_blocks=str(config.num_blocks),
        ).set(1)

    def observe_step(self, tokens: int, running: int, waiting: int, kv_usage: float, counters: Counters) -> None:
        """After each engine step: gauges, the step's size, and the model's counters mirrored."""
        if tokens:
            self.iteration_tokens.observe(tokens)
        self.running.set(running)
        self.waiting.set(waiting)
        self.kv_usage.set(kv_usage)
        for name, metric in self._mirrored.items():
            value = getattr(counters, name)
            metric.inc(value - self._seen.get(name, 0))
            self._seen[name] = value

    def observe_first_token(self, seq: Sequence) -> None:
        self.request_max_tokens.observe(seq.max_tokens)
        self.ttft.observe(seq.first_token_t - seq.arrival)  # type: ignore[operator]

    def observe_gap(self, gap_s: float) -> None:
        self.itl.observe(gap_s)

    def observe_finished(self, seq: Sequence) -> None:
        reason = seq.finish_reason or "abort"
        self.success[reason if reason in self.success else "abort"].inc()
        if seq.finished_t is None or seq.first_token_t is None or seq.first_scheduled is None:
            return
        n = len(seq.output)
        decode = seq.finished_t - seq.first_token_t
        self.request_prompt_tokens.observe(len(seq.prompt_ids))
        self.request_generation_tokens.observe(n)
        self.e2e.observe(seq.finished_t - seq.arrival)
        self.queue_time.observe(seq.first_scheduled - seq.arrival)
        self.inference_time.observe(seq.finished_t - seq.first_scheduled)
        self.prefill_time.observe(seq.first_token_t - seq.first_scheduled)
        self.decode_time.observe(decode)
        self.tpot.observe(decode / (n - 1) if n > 1 else 0.0)
        self.request_preemptions.observe(seq.num_preemptions)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
