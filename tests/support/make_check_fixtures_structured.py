"""Write the fixture bundles of the structured-output checks (LD108 schema-compile, LD212
constrained-decoding) and of the LoRA adapter-slot check (LD109 lora-slots-full).

Run ``.venv/bin/python -m tests.support.make_check_fixtures_structured``. The streams are
synthetic, shaped as the probe records a constrained ``--payload``: two unconstrained twins
first (``StreamEvidence.controls``: the first pays the prompt's cold prefix), then the
constrained warm-up and measured requests, one at a time. The LoRA scrapes carry
``vllm:lora_requests_info`` in vLLM's format (``v1/metrics/loggers.py``: one series per label
set, its value the time it was set): with the waiting adapters listed apart, as the V0 engine
reported them, or with both lists the adapters being served, as vLLM v1 does (0.32, seen on the
real CPU build: fixtures/bundles/realvllm-users-lora.json.gz).
"""

from __future__ import annotations

import copy
import sys
from typing import Any

from doctor.evidence import MetricsEvidence, RequestTrace, Scrape, StreamEvidence
from tests.support.bundles import bundle, exposition, log, metrics, real_log, request, stream
from tests.support.make_check_fixtures_engine import vllm_log
from tests.support.write_fixture import write_all, write_case

SCHEMA_BODY: dict[str, Any] = {
    "model": "m", "messages": [{"role": "user", "content": "Pick the product code for this order."}],
    "max_tokens": 32, "stream": True, "stream_options": {"include_usage": True},
    "response_format": {"type": "json_schema", "json_schema": {"name": "order", "schema": {
        "type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}}},
}
TOOLS_BODY: dict[str, Any] = {
    **{k: v for k, v in SCHEMA_BODY.items() if k != "response_format"},
    "tools": [{"type": "function", "function": {"name": "lookup_order", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}],
}
#: vLLM 0.32's engine-config line, cut after the structured-output config it names.
BACKEND_LINE = ("(EngineCore_DP0 pid=2215) INFO 11-30 07:41:02 [core.py:93] Initializing a V1 LLM engine (v0.32.0) "
                "with config: model='/srv/models/m', max_seq_len=8192, enforce_eager=False, "
                "structured_outputs_config=StructuredOutputsConfig(backend='auto', disable_any_whitespace=False, "
                "disable_additional_properties=False, reasoning_parser='', reasoning_parser_plugin='', "
                "enable_in_reasoning=False), seed=0")


def constrained(*, first_ttft: float, repeat_ttft: float, twin_ttft: float, gap: float, twin_gap: float,
                body: dict[str, Any] | None = None, constraints: list[str] | None = None, n: int = 6,
                twins: int = 2) -> StreamEvidence:
    """Twins, then a constrained warm-up and ``n`` measured constrained requests, one at a time."""
    controls = [request("direct", k, ttft=twin_ttft * (3 if k == 0 else 1), gaps=[twin_gap] * 31, start=2.0 * k)
                for k in range(twins)]
    reqs: list[RequestTrace] = []
    start = 2.0 * twins
    for i in range(n + 1):
        ttft = first_ttft if i == 0 else repeat_ttft
        reqs.append(request("direct", 0 if i == 0 else i - 1, ttft=ttft, gaps=[gap] * 31, start=start, warmup=i == 0))
        start += ttft + 31 * gap + 0.5
    ev = stream(reqs)
    ev.controls = controls
    ev.shape.warmup = 1
    ev.shape.payload = copy.deepcopy(body if body is not None else SCHEMA_BODY)
    ev.shape.payload_source = "request.json"
    ev.shape.prompt_tokens = None
    ev.shape.max_tokens = 32
    ev.shape.constraints = ["response_format:json_schema"] if constraints is None else constraints
    return ev


def held_back(ev: StreamEvidence, *, silence: float, tokens: int) -> StreamEvidence:
    """The last measured request's tool-call argument held back: after its 4th event, ``silence``
    seconds and then one event carrying ``tokens`` tokens (the events it replaced are gone)."""
    r = ev.requests[-1]
    kept = r.tokens[:4] + r.tokens[4 + tokens - 1:]
    for later in kept[4:]:
        later.t += silence - (tokens - 1) * (r.tokens[1].t - r.tokens[0].t)
    kept[4].tokens = tokens
    r.tokens, r.t_last_token = kept, kept[-1].t
    r.t_end = kept[-1].t + 0.001
    return ev


def silence_scrapes(ev: StreamEvidence, per_second: float) -> MetricsEvidence:
    """Scrapes 1 s apart through the held-back request's silence (after its 4th event), the engine's
    generation counter rising ``per_second`` (0: the engine generated nothing meanwhile)."""
    a, b = ev.requests[-1].tokens[3].t, ev.requests[-1].tokens[4].t
    times = [a - 0.5 + k for k in range(int(b - a) + 2)]
    return metrics(*((("during", t, {"vllm:generation_tokens_total": 1000 + per_second * (t - times[0]),
                                      "vllm:num_preemptions_total": 0})) for t in times))


def tool_stream(*, usage: bool) -> StreamEvidence:
    """A tools payload whose last request falls silent 6 s after its 4th event; its next event carries
    the 20 tokens by its usage, or (``usage`` off, a server without per-chunk usage) says one."""
    ev = held_back(constrained(first_ttft=0.25, repeat_ttft=0.22, twin_ttft=0.19, gap=0.03, twin_gap=0.03,
                               body=TOOLS_BODY, constraints=["tools"]), silence=6.0, tokens=20)
    if not usage:
        ev.requests[-1].tokens[4].tokens = 1
    return ev


def cases_schema_compile() -> None:
    name = "schema-compile"
    write_case(name, "fires-first-request-compiles", bundle(
        stream=constrained(first_ttft=2.41, repeat_ttft=0.21, twin_ttft=0.19, gap=0.02, twin_gap=0.02),
        log=log([BACKEND_LINE])),
        why="Synthetic: the first constrained request 2.41 s to its first token, the repeats 0.21 s, the "
            "prefix-warm unconstrained twin 0.19 s (its cold twin 0.57 s): a one-time compile. vLLM 0.32's "
            "engine-config line names the backend.",
        expect={"severity": "warning", "setting": "structured_outputs_config", "summary_contains": ["compile"]})
    write_case(name, "quiet-no-compile-cost", bundle(
        stream=constrained(first_ttft=0.23, repeat_ttft=0.21, twin_ttft=0.19, gap=0.02, twin_gap=0.02)),
        why="Synthetic: the first constrained request as fast as the repeats (a cached or cheap schema).")
    write_case(name, "quiet-every-request-slow", bundle(
        stream=constrained(first_ttft=0.82, repeat_ttft=0.8, twin_ttft=0.2, gap=0.02, twin_gap=0.02)),
        why="Synthetic: every constrained request waits 0.8 s, the twin 0.2 s: no first-request compile "
            "(a per-request cost, not this check's).")
    write_case(name, "na-free-text-payload", bundle(
        stream=constrained(first_ttft=2.41, repeat_ttft=0.21, twin_ttft=0.19, gap=0.02, twin_gap=0.02,
                           constraints=[], twins=0)),
        why="Synthetic: the probe's body constrains nothing: no twin sent, nothing to tell.")
    write_case(name, "na-no-twin-answered", bundle(
        stream=constrained(first_ttft=2.41, repeat_ttft=0.21, twin_ttft=0.19, gap=0.02, twin_gap=0.02, twins=0)),
        why="Synthetic: a constrained payload from a bundle written before the probe sent twins: the first "
            "request's cold prefix cannot be told from a compile.")


def cases_constrained_decoding() -> None:
    name = "constrained-decoding"
    write_case(name, "fires-steady-mask-cost", bundle(
        stream=constrained(first_ttft=0.25, repeat_ttft=0.22, twin_ttft=0.19, gap=0.084, twin_gap=0.031)),
        why="Synthetic: every constrained request 84 ms per token, the unconstrained twin 31 ms: the per-step "
            "mask, steady.",
        expect={"severity": "warning", "setting": "structured_outputs_config", "summary_contains": ["2.7x"]})
    write_case(name, "fires-tool-arguments-held", bundle(stream=tool_stream(usage=True)),
        why="Synthetic, shaped on vllm PR#50627's report (longest silence 32 s, one delta): a tool-call stream "
            "silent 6 s, then one event carrying 20 tokens by its continuous usage.",
        expect={"severity": "warning", "setting": "tool_call_parser", "summary_contains": ["20 tokens"]})
    no_usage = tool_stream(usage=False)
    write_case(name, "fires-tool-silence-counter-rises", bundle(stream=no_usage, metrics=silence_scrapes(no_usage, 33.0)),
               why="Synthetic: the same held-back tool call from a server without per-chunk usage; the engine's "
                   "generation counter rises 33 tokens a second in the scrapes inside the 6 s silence.",
               expect={"severity": "warning", "setting": "tool_call_parser", "summary_contains": ["counter rose"]})
    write_case(name, "quiet-tool-silence-engine-idle", bundle(stream=no_usage, metrics=silence_scrapes(no_usage, 0.0)),
               why="Synthetic: the same 6 s silence with the engine's generation counter flat: the engine stopped "
                   "(a stall, not the parser), and constrained decoding is as fast as the twin.")
    write_case(name, "quiet-same-speed", bundle(
        stream=constrained(first_ttft=0.25, repeat_ttft=0.22, twin_ttft=0.19, gap=0.032, twin_gap=0.031)),
        why="Synthetic: constrained and unconstrained decode at the same speed.")
    write_case(name, "quiet-within-target", bundle(
        stream=constrained(first_ttft=0.25, repeat_ttft=0.22, twin_ttft=0.19, gap=0.03, twin_gap=0.01)),
        why="Synthetic: 3x slower constrained, but 30 ms per token is within the 50 ms target.")
    write_case(name, "na-free-text-payload", bundle(
        stream=constrained(first_ttft=0.25, repeat_ttft=0.22, twin_ttft=0.19, gap=0.084, twin_gap=0.031,
                           constraints=[], twins=0)),
        why="Synthetic: the probe's body constrains nothing.")


#: One scrape's LoRA state: (running adapters, waiting adapters, vllm:num_requests_waiting).
LoraState = tuple[str, str, int]


def lora_scrapes(max_lora: int, states: list[LoraState], ttft_s: float | None = None) -> MetricsEvidence:
    """Scrapes 1 s apart, each with every label set reported so far (vLLM keeps old series until a
    restart), the current one set last; and the running / waiting gauges. With ``ttft_s``, the TTFT
    histogram observes one first token of that length per scrape."""
    scrapes, seen = [], {}
    for k, (running, waiting, queued) in enumerate(states):
        ttft = {} if ttft_s is None else {"vllm:time_to_first_token_seconds": {"sum": round(ttft_s * k, 6), "count": k}}
        seen[(running, waiting)] = 1_700_000_000.0 + k
        lines = ["# HELP vllm:lora_requests_info Running stats on lora requests.",
                 "# TYPE vllm:lora_requests_info gauge"]
        lines += [f'vllm:lora_requests_info{{max_lora="{max_lora}",running_lora_adapters="{r}",'
                  f'waiting_lora_adapters="{w}"}} {t!r}' for (r, w), t in seen.items()]
        text = exposition({"vllm:num_requests_running": len(running.split(",")) * 2,
                           "vllm:num_requests_waiting": queued, **ttft}) + "\n".join(lines) + "\n"
        scrapes.append(Scrape(phase="during", t=float(k), wall=1_700_000_000.0 + k, status=200,
                              content_type="text/plain; version=0.0.4", text=text))
    return MetricsEvidence(url="http://127.0.0.1:8000/metrics", interval_s=1.0, scrapes=scrapes)


def cases_lora_slots_full() -> None:
    name = "lora-slots-full"
    churn = [("chat-lora,code-lora", "sql-lora", 6), ("chat-lora,sql-lora", "code-lora", 5),
             ("chat-lora,code-lora", "", 0), ("code-lora,sql-lora", "chat-lora", 4)]
    write_case(name, "fires-three-adapters-two-slots", bundle(metrics=lora_scrapes(2, churn)),
               why="Synthetic scrapes with the waiting adapters listed apart (vLLM's V0 engine): three adapters in "
                   "use on --max-loras 2; in 3 of 4 scrapes a request waits for the adapter the full slots do not hold. "
                   "No TTFT was measured: a risk, not felt latency.",
               expect={"severity": "warning", "felt": False, "setting": "max_loras",
                       "summary_contains": ["sql-lora", "3 adapters"]})
    write_case(name, "fires-felt-ttft-over-budget", bundle(metrics=lora_scrapes(2, churn, ttft_s=2.4)),
               why="The same churn, with the engine's TTFT histogram observing 2.4 s first tokens: over the 500 ms "
                   "budget, so users felt the slot wait.",
               expect={"severity": "warning", "felt": True, "setting": "max_loras"})
    write_case(name, "fires-risk-ttft-within-budget", bundle(metrics=lora_scrapes(2, churn, ttft_s=0.2)),
               why="The same churn, with 200 ms first tokens: requests waited for a slot, TTFT within budget: a risk.",
               expect={"severity": "warning", "felt": False, "setting": "max_loras"})
    fits = [("adapter_ko", "adapter_ko", 3), ("adapter_json", "adapter_json", 2), ("", "", 0)]
    write_case(name, "quiet-waiting-for-a-loaded-adapter", bundle(metrics=lora_scrapes(2, fits)),
               why="Synthetic, the shape of a public --max-loras 2 run with two adapters mixed: the waiting "
                   "requests' adapter is the running one (already loaded), and the latest series is idle.")
    turns = [("alpha", "alpha", 4), ("beta", "beta", 3), ("alpha", "alpha", 4), ("beta", "beta", 4)]
    write_case(name, "fires-v1-adapters-take-turns",
               bundle(metrics=lora_scrapes(1, turns, ttft_s=3.9), log=vllm_log({"max_num_seqs": 128})),
               why="vLLM v1's form, as the real 0.32 CPU build wrote it: both label lists name the adapter being "
                   "served, never one waiting. Two adapters take turns in --max-loras 1 while 3-4 requests wait with "
                   "2 of 128 batch seats taken: they wait for the slot. First tokens of 3.9 s: felt.",
               expect={"severity": "warning", "felt": True, "setting": "max_loras",
                       "summary_contains": ["took turns in 1 slot", "2 of 128 batch seats"]})
    write_case(name, "quiet-v1-every-seat-taken",
               bundle(metrics=lora_scrapes(1, turns, ttft_s=3.9), log=vllm_log({"max_num_seqs": 2})),
               why="The same turns, but the running gauge (2) is max_num_seqs: requests wait for a batch seat "
                   "whatever their adapter, which is LD101's queueing, not a slot wait.")
    write_case(name, "quiet-v1-one-adapter",
               bundle(metrics=lora_scrapes(1, [("alpha", "alpha", 4)] * 3), log=vllm_log({"max_num_seqs": 128})),
               why="One adapter served in its one slot while requests wait: nothing takes turns.")
    write_case(name, "na-lora-off", bundle(metrics=MetricsEvidence(
        url="http://127.0.0.1:8000/metrics", interval_s=1.0,
        scrapes=[Scrape(phase="during", t=0.0, wall=1_700_000_000.0, status=200, content_type="text/plain",
                        text=exposition({"vllm:num_requests_running": 2, "vllm:num_requests_waiting": 3}))])),
               why="Synthetic: no vllm:lora_requests_info (served without --enable-lora).")
    write_case(name, "na-sglang-pool-from-its-log", bundle(
        metrics=MetricsEvidence(url="http://127.0.0.1:30000/metrics", interval_s=1.0, scrapes=[
            Scrape(phase="during", t=0.0, wall=1_700_000_000.0, status=200, content_type="text/plain",
                   text="# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{model_name=\"m\"} 4.0\n")]),
        log=real_log("sglang/2026-03-docs-offline-engine-server-args-capturing-cut.log", "engines")),
               why="SGLang: the real server_args line of its docs notebook (max_loras_per_batch=8) and a scrape in "
                   "SGLang's names: the pool size is named, which adapters wait is not exposed.")


def main() -> None:
    write_all(sys.modules[__name__])


if __name__ == "__main__":
    main()
