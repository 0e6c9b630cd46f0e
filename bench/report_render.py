"""Benchmark: rendering the reports of a large run, and how big the HTML gets.

Not a test (timings are for a person to read). It builds a run larger than a typical incident
probe: two paths (direct, and a gateway that buffers 4 KiB) x ``--requests`` requests of
``--tokens`` tokens each, plus one /metrics scrape a second over the probe, analyses it with the
real runner, then times each renderer and splits the HTML's size into the embedded bundle and
the page itself (charts, tables).

    .venv/bin/python bench/report_render.py                  # 64 requests x 512 tokens per path
    .venv/bin/python bench/report_render.py --requests 256 --tokens 1024

Goal (issue 4): the page around the bundle stays a few hundred KB whatever the run's size (charts
draw a bounded number of requests at the canvas' resolution). Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.bundle import embed_text, load_path  # noqa: E402
from doctor.checking.runner import analyze  # noqa: E402
from reports import render_html, render_json, render_markdown  # noqa: E402
from tests.support import bundles  # noqa: E402


def build(requests: int, tokens: int, concurrency: int = 8):
    gap = 0.02
    duration = 0.0
    traces = []
    for path, burst in (("direct", None), ("gateway", 4096)):
        for i in range(requests):
            start = duration + (i // concurrency) * (0.1 + gap * tokens)
            traces.append(bundles.request(path, len(traces), ttft=0.08, gaps=[gap] * (tokens - 1), start=start,
                                          burst_bytes=burst))
        duration = max(t.t_end or 0.0 for t in traces) + 0.5
    scrapes = [("before", -0.1, {"vllm:num_requests_running": 0, "vllm:kv_cache_usage_perc": 0.0})]
    for s in range(1, int(duration)):
        scrapes.append(("during", float(s), {"vllm:num_requests_running": concurrency, "vllm:num_requests_waiting": 0,
                                             "vllm:kv_cache_usage_perc": 0.4, "vllm:num_preemptions_total": 0}))
    scrapes.append(("after", duration, {"vllm:num_requests_running": 0, "vllm:kv_cache_usage_perc": 0.0,
                                        "vllm:num_preemptions_total": 0}))
    return bundles.bundle(stream=bundles.stream(traces, concurrency=concurrency), metrics=bundles.metrics(*scrapes))


def timed(fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--requests", type=int, default=64, help="requests per path")
    parser.add_argument("--tokens", type=int, default=512, help="tokens per request")
    parser.add_argument("--bundle", type=Path, help="render a saved bundle instead (e.g. a recorded real-vLLM run)")
    args = parser.parse_args()
    bundle = load_path(args.bundle) if args.bundle else build(args.requests, args.tokens)
    report, analyse_s = timed(analyze, bundle)
    html, html_s = timed(render_html, report)
    js, json_s = timed(render_json, report)
    md, md_s = timed(render_markdown, report)
    embedded = len(embed_text(bundle).encode())
    total = len(html.encode())
    shape = args.bundle.name if args.bundle else f"2 paths x {args.requests} requests x {args.tokens} tokens"
    print(f"run: {shape}, {len(bundle.metrics.scrapes) if bundle.metrics else 0} scrapes")
    print(f"analyze   {analyse_s * 1000:8.0f} ms")
    print(f"html      {html_s * 1000:8.0f} ms  {total / 1024:8.0f} KiB  (bundle {embedded / 1024:.0f} KiB, "
          f"page {(total - embedded) / 1024:.0f} KiB)")
    print(f"json      {json_s * 1000:8.0f} ms  {len(js.encode()) / 1024:8.0f} KiB")
    print(f"markdown  {md_s * 1000:8.0f} ms  {len(md.encode()) / 1024:8.1f} KiB")


if __name__ == "__main__":
    main()
