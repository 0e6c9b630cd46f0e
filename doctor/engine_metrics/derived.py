"""Quantities an engine does not expose, derived from the ones it does, and marked as derived.

llama-server's /metrics has no KV gauge since 2025 (``kv_cache_usage_ratio`` went with the old
KV cache); its ``/slots``, taken with each scrape, says how many tokens each busy slot holds, so
the KV usage gauge is read from them (``doctor.engines.server_info.slots_kv_usage``) and named
``SLOTS_KV_USAGE``.

TGI has no time-to-first-token histogram (``docs/source/reference/metrics.md``). A request's
first token comes after its wait in the queue (``tgi_request_queue_duration``, per request) and
the prefill forward of the batch it joins (``tgi_batch_forward_duration{method="prefill"}``, per
batch), so the mean TTFT is about the sum of those two means. It is a mean only (the sum of two
distributions has no buckets to read a quantile from) and it leaves out validation and
tokenisation, so it is a lower bound of what the router measured; ``HistogramWindow.derived``
says how it was made and the window's notes say it too.
"""

from __future__ import annotations

from doctor.engine_metrics.readings import GaugeSeries
from doctor.engine_metrics.views import HistogramWindow, MetricsWindow

#: How the derived TTFT is named wherever a metric name is shown.
TGI_TTFT = 'tgi_request_queue_duration + tgi_batch_forward_duration{method="prefill"}'
#: How the KV usage read from llama-server's slots is named.
SLOTS_KV_USAGE = "llama.cpp /slots (busy slots' tokens / n_ctx)"


def derive_missing(window: MetricsWindow) -> None:
    """Fill, in place, what the window lacks and its other readings give (TGI's TTFT)."""
    queue, prefill = window.queue, window.prefill_forward
    if window.ttft is not None or queue is None or prefill is None or queue.mean is None or prefill.mean is None:
        return
    mean = queue.mean + prefill.mean
    window.ttft = HistogramWindow(count=queue.count, sum=mean * queue.count, mean=mean, metric=TGI_TTFT,
                                  derived="mean queue time + mean prefill forward time (no TTFT histogram)")
    window.metric_names["ttft"] = TGI_TTFT
    if "ttft" in window.missing:
        window.missing.remove("ttft")
    window.notes.append(f"ttft: derived as {TGI_TTFT} means (TGI exposes no TTFT histogram): "
                        "a mean only, without validation and tokenisation")


def derive_slots_kv_usage(window: MetricsWindow, samples: list[tuple[float, float]]) -> None:
    """The KV usage gauge from llama-server's slots at each scrape's time, where /metrics had none."""
    if window.kv_usage is not None or not samples:
        return
    window.kv_usage = GaugeSeries(samples=samples).window()
    window.metric_names["kv_usage"] = SLOTS_KV_USAGE
    if "kv_usage" in window.missing:
        window.missing.remove("kv_usage")
    window.notes.append(f"kv_usage: read from {SLOTS_KV_USAGE} in {len(samples)} scrapes (no KV gauge in /metrics)")
