"""A tiny /metrics server on 127.0.0.1 that answers what a test tells it to (real HTTP, real sockets).

It serves either a fixed body (a real scrape, an HTML error page, garbage), or, with
``ticking=True``, a vLLM-shaped exposition that advances by a known amount on every GET so a
scraper or a real Prometheus sees counters grow, a histogram fill and gauges move.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

#: Per GET, per engine: what the ticking exposition adds.
TICK = {"preemptions": 1, "generation_tokens": 100, "prompt_tokens": 40, "length": 2, "ttft_count": 2, "ttft_sum": 0.3}
#: KV usage of engine 0 on successive GETs (engine 1 is half of it); running = GET number % 4.
KV_CYCLE = (0.1, 0.5, 0.9, 0.3)
TTFT_BOUNDS = (0.1, 0.25, 1.0)


def ticking_exposition(n: int, engines: tuple[str, ...] = ("0", "1"), model: str = "m", bare: tuple[str, ...] = ()) -> str:
    """The exposition after ``n`` GETs. TTFT observations all land in le=0.25.

    Engines in ``bare`` name their counters without ``_total``, as vLLM 0.2's aioprometheus did.
    """
    lines: list[str] = []
    for fam in ("num_preemptions", "generation_tokens", "prompt_tokens", "request_success"):
        for suffix, named in (("_total", [e for e in engines if e not in bare]), ("", [e for e in engines if e in bare])):
            if not named:
                continue
            lines += [f"# HELP vllm:{fam}{suffix} c", f"# TYPE vllm:{fam}{suffix} counter"]
            for e in named:
                if fam == "request_success":
                    lines += [f'vllm:{fam}{suffix}{{engine="{e}",finished_reason="{reason}",model_name="{model}"}} {n * per}.0'
                              for reason, per in (("stop", 0), ("length", TICK["length"]))]
                else:
                    lines.append(f'vllm:{fam}{suffix}{{engine="{e}",model_name="{model}"}} {n * TICK[fam.removeprefix("num_")]}.0')
                if fam == "num_preemptions" and suffix:
                    lines.append(f'vllm:{fam}_created{{engine="{e}",model_name="{model}"}} 1.7e+09')
    lines += ["# HELP vllm:time_to_first_token_seconds h", "# TYPE vllm:time_to_first_token_seconds histogram"]
    for e in engines:
        count = n * TICK["ttft_count"]
        for le in TTFT_BOUNDS:
            lines.append(
                f'vllm:time_to_first_token_seconds_bucket{{engine="{e}",le="{le}",model_name="{model}"}} {count if le >= 0.25 else 0}.0'
            )
        lines.append(f'vllm:time_to_first_token_seconds_bucket{{engine="{e}",le="+Inf",model_name="{model}"}} {count}.0')
        lines.append(f'vllm:time_to_first_token_seconds_count{{engine="{e}",model_name="{model}"}} {count}.0')
        lines.append(f'vllm:time_to_first_token_seconds_sum{{engine="{e}",model_name="{model}"}} {n * TICK["ttft_sum"]!r}')
    lines += ["# HELP vllm:kv_cache_usage_perc g", "# TYPE vllm:kv_cache_usage_perc gauge"]
    for i, e in enumerate(engines):
        lines.append(f'vllm:kv_cache_usage_perc{{engine="{e}",model_name="{model}"}} {KV_CYCLE[n % len(KV_CYCLE)] / (i + 1)!r}')
    lines += ["# HELP vllm:num_requests_running g", "# TYPE vllm:num_requests_running gauge"]
    lines += [f'vllm:num_requests_running{{engine="{e}",model_name="{model}"}} {n % 4}.0' for e in engines]
    # Declared with no sample, as prometheus_client prints a labelled family never used.
    lines += ["# HELP vllm:num_requests_waiting g", "# TYPE vllm:num_requests_waiting gauge"]
    return "\n".join(lines) + "\n"


@dataclass
class Answer:
    body: str = ""
    status: int = 200
    content_type: str = "text/plain; version=0.0.4; charset=utf-8"
    delay_s: float = 0.0  # before the headers
    drip_s: float = 0.0  # between body bytes (a server that never finishes in time)


class Exporter:
    """``with Exporter() as ex: ex.answer.body = ...; ex.url``; ``ticking=True`` for a moving exposition."""

    def __init__(self, *, ticking: bool = False, bare: tuple[str, ...] = ()) -> None:
        self.answer = Answer()
        self.ticking = ticking
        self.bare = bare
        self.gets = 0
        self._lock = threading.Lock()
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/metrics-moved":
                    self.send_response(307)
                    self.send_header("Location", "/metrics")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                with exporter._lock:
                    exporter.gets += 1
                    n = exporter.gets
                a = exporter.answer
                body = (ticking_exposition(n, bare=exporter.bare) if exporter.ticking else a.body).encode()
                time.sleep(a.delay_s)
                try:
                    self.send_response(a.status)
                    self.send_header("Content-Type", a.content_type)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    if a.drip_s:
                        for i in range(len(body)):
                            self.wfile.write(body[i : i + 1])
                            self.wfile.flush()
                            time.sleep(a.drip_s)
                    else:
                        self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up, as a scraper with a deadline should

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/metrics"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Exporter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
