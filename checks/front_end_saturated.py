"""The API server is saturated: one core busy serving streams while the engine steps faster than users see.

What it detects:
A saturated front end: over the probe window the serving process's CPU time grew at
``min_cores`` or more cores (``process_cpu_seconds_total``, which vLLM's /metrics exports for its
API server process) while the client's per-token time (TPOT p50) is ``min_ratio`` or more times
the engine's own inter-token latency (its histogram's mean over the same window).

Why it matters:
vLLM's API server (SGLang's tokenizer manager) is one Python process doing tokenisation, chat
templates, detokenisation, logprobs and SSE for every stream (vllm RFC #40846; sglang#23393:
client inter-token 180 ms while the scheduler stepped every 39 ms). When it pegs its core the
engine idles between outputs it cannot hand on, and users see slow or bundled tokens that no
engine setting (batch size, KV cache, chunking) will speed up.

Evidence:
metrics: ``process_cpu_seconds_total`` at the first and last usable scrape of the window
(``doctor.engine_metrics.runtime``); metrics_window: the engine's inter-token histogram (mean);
stream_stats: the client's TPOT p50 and gaps on the engine path, and tokens per chunk (an API
server that falls behind merges tokens into one event). A /metrics with no process CPU counter:
the check says so ("not exposed by ENGINE", or only that its /metrics has none on an
unidentified engine).

Remediation:
vLLM: more API server processes (``--api-server-count``, e.g. 2 or one per 2-4 busy cores);
SGLang: tokenizer workers (``--tokenizer-worker-num``). Verify: the API server's CPU rate falls
below one core and the client's TPOT comes down to the engine's inter-token latency.

Options:
min_cores: API-server CPU rate, in cores, at which the front end counts as saturated
min_ratio: client TPOT p50 / engine inter-token mean at which it fires
tpot_target_s: the inter-token target (defaults to --tpot-budget): a client TPOT within it is a
    risk (the front end has no headroom left), not felt latency

Example:
LD211 front-end-saturated: the API server used 0.97 cores over 28 s while the engine's
inter-token mean was 21 ms and the client's TPOT p50 64 ms (3.0x) -> --api-server-count 2.
"""

from __future__ import annotations

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import engine_path, not_in_metrics, process_cores, rerun, unidentified_setting
from doctor.derive.chunking import tokens_per_chunk
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.metrics_window import MetricsWindow
from doctor.derive.stream_stats import StreamStats
from doctor.engine_metrics.runtime import readings
from doctor.engines import RECORDS
from doctor.engines.names import UNKNOWN, display
from doctor.evidence import MetricsEvidence, StreamEvidence
from doctor.foundation.units import fmt_seconds
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: The front end's lever per engine: (setting, suggested, where), its record's ``front_end_lever``.
LEVERS: dict[str, tuple[str, str, str]] = {r.id: r.front_end_lever for r in RECORDS if r.front_end_lever}


@check(code="LD211", name="front-end-saturated", symptom=SymptomClass.INTER_TOKEN, cause=Cause.FRONTEND)
def front_end_saturated(
    metrics: MetricsEvidence,
    metrics_window: MetricsWindow,
    stream_stats: StreamStats,
    stream: StreamEvidence | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    min_cores: float = 0.8,
    min_ratio: float = 1.5,
    tpot_target_s: float = 0.05,
) -> Result:
    engine_id = engine.id
    cpu = process_cores(readings(metrics.scrapes))
    if cpu is None:
        raise NotApplicable(not_in_metrics(engine_id, "process_cpu_seconds_total for its serving process"))
    cores, window_s = cpu
    itl = metrics_window.itl
    path = engine_path(stream_stats)
    if itl is None or itl.mean is None or not itl.count or path is None or path.tpot.p50 is None:
        raise NotApplicable("needs the engine's inter-token histogram and the client's TPOT over the same window")
    client, server = path.tpot.p50, itl.mean
    ratio = client / server if server > 0 else 0.0
    if cores < min_cores:
        return Pass(f"the API server used {cores:.2f} cores over {fmt_seconds(window_s)}: not saturated")
    if ratio < min_ratio:
        return Pass(f"the API server used {cores:.2f} cores, but the client's TPOT p50 {fmt_seconds(client)} keeps up "
                    f"with the engine's inter-token mean {fmt_seconds(server)} ({ratio:.1f}x)")
    summary = (f"the API server used {cores:.2f} cores over {fmt_seconds(window_s)} while the engine's inter-token mean "
               f"was {fmt_seconds(server)} and {path.path}'s TPOT p50 {fmt_seconds(client)} ({ratio:.1f}x)")
    values = [
        EvidenceValue("API-server CPU", round(cores, 2), "cores", "metrics: process_cpu_seconds_total delta / window"),
        EvidenceValue("engine inter-token mean", server, "s", f"metrics: {itl.metric} mean, n={itl.count:.0f}"),
        EvidenceValue("client TPOT p50", client, "s", f"stream: {path.path}, n={path.tpot.n}"),
    ]
    chunks = tokens_per_chunk(stream) if stream is not None else None
    if chunks is not None and chunks[0] > 1.0:
        summary += f"; {chunks[0]:.1f} tokens per chunk (the API server merges what it fell behind on)"
        values.append(EvidenceValue("tokens per chunk", round(chunks[0], 1), "tokens",
                                    f"stream: {chunks[1]} tokens in {chunks[2]} events"))
    setting, suggested, where = _lever(engine_id)
    return Fire(
        title="The API server is saturated: the engine is faster than the stream users get",
        summary=summary,
        remediation=Remediation(
            setting=setting,
            suggested=suggested,
            why=(f"one front-end process at {cores:.2f} cores serializes tokenisation, detokenisation and SSE for every "
                 f"stream: users get a token every {fmt_seconds(client)} while the engine makes one every "
                 f"{fmt_seconds(server)}"),
            verify=rerun("the API server's CPU below one core and the client's TPOT near the engine's inter-token mean"),
            where=where,
        ),
        severity=Severity.WARNING,
        felt=client > tpot_target_s,
        evidence=values,
    )


def _lever(engine: str) -> tuple[str, str, str]:
    """The front end's lever on ``engine`` (setting, suggested, where): its own, the neutral wording with
    every known engine's on an unidentified one, else "not exposed"."""
    if engine == UNKNOWN:
        return ("front_end_processes", "2 (more front-end processes), or fewer concurrent streams per replica",
                unidentified_setting("front-end processes", (where for _, _, where in LEVERS.values())))
    return LEVERS.get(engine, (
        "front_end_processes",
        f"not exposed by {display(engine)}: no setting adds front-end processes; fewer concurrent streams per replica",
        f"the {display(engine)} deployment"))
