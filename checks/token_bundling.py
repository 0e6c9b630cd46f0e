"""Stream chunks carry several tokens each: per-chunk gaps are not per-token gaps.

What it detects:
Token bundling: the answers' usage trailers count several tokens per token-bearing SSE event
(or the server said so per event), or the engine runs with ``stream_interval`` > 1.

Why it matters:
Users read what arrives: with k tokens per chunk they see bursts of k tokens after k times the
per-token gap. The gaps this tool measures (ITL) are gaps between chunks, k times the engine's
per-token time; TPOT counts tokens (usage, or tokens per event) and is not inflated, so a long
ITL beside a TPOT within budget is bundling, not a slow engine.
vLLM bundles on purpose with ``stream_interval`` > 1 (less CPU per token), and V1's API server
merges tokens it has not sent yet when its event loop falls behind.

Evidence:
stream: completion tokens from the usage trailers / token-bearing events (or tokens per event
when the server reports continuous usage). Startup log / run record: ``stream_interval``.

Remediation:
``stream_interval`` > 1: set it to 1 if smooth streaming matters more than API-server CPU.
Otherwise the API server is falling behind: add API server processes (``api_server_count``).

Options:
bundle_threshold: tokens per chunk at which it fires (info)
warning_tokens: tokens per chunk at which it becomes a warning (users see visible bursts)

Example:
direct: 4.0 tokens per chunk (800 tokens in 200 chunks, n=8); stream_interval = 4 (log line 9)
-> stream_interval 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_flag, engine_setting, rerun
from doctor.derive.chunking import tokens_per_chunk
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts
from doctor.engines.names import display
from doctor.evidence import RunRecord, StreamEvidence
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """Tokens per chunk (with the tokens, chunks and answers counted) and the ``stream_interval`` in
    use; ``by_config``: the interval bundles on purpose (more than 1)."""

    engine: str
    per_chunk: tuple[float, int, int, int] | None
    interval: Setting | None
    by_config: bool


@check(code="LD205", name="token-bundling", symptom=SymptomClass.INTER_TOKEN, cause=Cause.TOKEN_BUNDLING)
def token_bundling(
    stream: StreamEvidence,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    bundle_threshold: float = 1.5,
    warning_tokens: float = 4.0,
) -> Result:
    per_chunk = tokens_per_chunk(stream)
    interval = engine_setting("stream_interval", log_facts, run)
    if per_chunk is None and interval is None:
        return NotApplicable("no usage trailer (completion tokens) and no stream_interval in the log")
    k = per_chunk[0] if per_chunk is not None else 1.0
    found = Found(engine.id, per_chunk, interval, interval is not None and int(interval.value) > 1)
    if k < bundle_threshold and not found.by_config:
        return Pass(_read(found))
    return Fire(
        felt=False,  # tokens arrive at the same rate (TPOT), grouped: a witness says when users feel it
        title="Chunks carry several tokens: per-chunk gaps are not per-token gaps",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.WARNING if k >= warning_tokens else Severity.INFO,
        evidence=_evidence(found),
    )


def _read(found: Found) -> str:
    parts: list[str] = []
    if found.per_chunk is not None:
        k, tokens, chunks, n = found.per_chunk
        parts.append(f"{k:.1f} tokens per chunk ({tokens} tokens in {chunks} chunks, n={n})")
    if found.interval is not None:
        parts.append(f"stream_interval = {found.interval.value} ({found.interval.source})")
    return "; ".join(parts)


def _summary(found: Found) -> str:
    return _read(found) + "; per-chunk gaps overstate per-token gaps"


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence: list[EvidenceValue] = []
    if found.per_chunk is not None:
        evidence.append(EvidenceValue("tokens per chunk", round(found.per_chunk[0], 2), "tokens",
                                      f"stream: completion tokens / token-bearing events, n={found.per_chunk[3]}"))
    if found.interval is not None:
        evidence.append(found.interval.evidence("stream_interval"))
    return evidence


def _remediation(found: Found) -> Remediation:
    interval = found.interval
    if found.by_config and interval is not None:
        return Remediation(
            setting="stream_interval",
            suggested="1",
            why=(f"the engine sends a chunk every {interval.value} tokens: users see bursts and every measured gap "
                 "spans several tokens; 1 streams each token (more API-server CPU per token)"),
            verify=rerun("about 1 token per chunk and an ITL near the TPOT"),
            current=str(interval.value),
            where=engine_flag(found.engine, "stream_interval"),
        )
    return Remediation(
        setting="api_server_count",
        suggested="raise it (e.g. 2): more API server processes",
        why=(f"with stream_interval 1 {display(found.engine)}'s API server merges tokens it has not sent yet only "
             "when its event loop falls behind the engine: it is the bottleneck of the stream"),
        verify=rerun("about 1 token per chunk"),
        where=engine_flag(found.engine, "api_server_count"),
    )
