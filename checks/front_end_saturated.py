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

from dataclasses import dataclass

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


@dataclass(frozen=True)
class Found:
    """The API server's CPU (cores over ``window_s``) against the engine's inter-token mean and the
    client's TPOT p50 on ``path`` (``ratio``: client over engine), and the tokens per chunk (with
    the tokens and events counted) when the stream shows merging."""

    engine: str
    cores: float
    window_s: float
    server: float
    itl_metric: str | None
    itl_n: float
    path: str
    client: float
    client_n: int
    ratio: float
    chunks: tuple[float, int, int, int] | None


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
    cpu = process_cores(readings(metrics.scrapes))
    if cpu is None:
        raise NotApplicable(not_in_metrics(engine.id, "process_cpu_seconds_total for its serving process"))
    itl = metrics_window.itl
    path = engine_path(stream_stats)
    if itl is None or itl.mean is None or not itl.count or path is None or path.tpot.p50 is None:
        raise NotApplicable("needs the engine's inter-token histogram and the client's TPOT over the same window")
    client, server = path.tpot.p50, itl.mean
    chunks = tokens_per_chunk(stream) if stream is not None else None
    found = Found(engine.id, cpu[0], cpu[1], server, itl.metric, itl.count, path.path, client, path.tpot.n,
                  client / server if server > 0 else 0.0, chunks if chunks is not None and chunks[0] > 1.0 else None)
    if found.cores < min_cores:
        return Pass(_not_saturated(found))
    if found.ratio < min_ratio:
        return Pass(_keeps_up(found))
    return Fire(
        title="The API server is saturated: the engine is faster than the stream users get",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING,
        felt=client > tpot_target_s,
        evidence=_evidence(found),
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


def _not_saturated(found: Found) -> str:
    return f"the API server used {found.cores:.2f} cores over {fmt_seconds(found.window_s)}: not saturated"


def _keeps_up(found: Found) -> str:
    return (f"the API server used {found.cores:.2f} cores, but the client's TPOT p50 {fmt_seconds(found.client)} keeps "
            f"up with the engine's inter-token mean {fmt_seconds(found.server)} ({found.ratio:.1f}x)")


def _summary(found: Found) -> str:
    summary = (f"the API server used {found.cores:.2f} cores over {fmt_seconds(found.window_s)} while the engine's "
               f"inter-token mean was {fmt_seconds(found.server)} and {found.path}'s TPOT p50 "
               f"{fmt_seconds(found.client)} ({found.ratio:.1f}x)")
    if found.chunks is not None:
        summary += f"; {found.chunks[0]:.1f} tokens per chunk (the API server merges what it fell behind on)"
    return summary


def _evidence(found: Found) -> list[EvidenceValue]:
    values = [
        EvidenceValue("API-server CPU", round(found.cores, 2), "cores", "metrics: process_cpu_seconds_total delta / window"),
        EvidenceValue("engine inter-token mean", found.server, "s", f"metrics: {found.itl_metric} mean, n={found.itl_n:.0f}"),
        EvidenceValue("client TPOT p50", found.client, "s", f"stream: {found.path}, n={found.client_n}"),
    ]
    if found.chunks is not None:
        values.append(EvidenceValue("tokens per chunk", round(found.chunks[0], 1), "tokens",
                                    f"stream: {found.chunks[1]} tokens in {found.chunks[2]} events"))
    return values


def _remediation(found: Found) -> Remediation:
    setting, suggested, where = _lever(found.engine)
    return Remediation(
        setting=setting,
        suggested=suggested,
        why=(f"one front-end process at {found.cores:.2f} cores serializes tokenisation, detokenisation and SSE for "
             f"every stream: users get a token every {fmt_seconds(found.client)} while the engine makes one every "
             f"{fmt_seconds(found.server)}"),
        verify=rerun("the API server's CPU below one core and the client's TPOT near the engine's inter-token mean"),
        where=where,
    )
