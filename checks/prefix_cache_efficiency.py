"""Few prompt tokens are served from the prefix cache.

What it detects:
Over the metrics window, the share of prompt tokens looked up in vLLM's prefix cache that were
hits (`vllm:prefix_cache_hits_total` / `vllm:prefix_cache_queries_total`) is below
`min_hit_rate` (vllm-doctor's prefix-cache-efficiency rule).

Why it matters:
Every hit is prefill the engine skips: a shared system prompt or few-shot block served from the
cache costs no compute and no time to first token. A low hit rate means either the prompts
share little (then there is nothing to gain) or the shared part is not a byte-identical
prefix (a timestamp or user id in the system prompt breaks every hit after it).

Evidence:
Metrics window: prefix-cache hit and query deltas (tokens). Startup log (or run record):
`enable_prefix_caching`.

Remediation:
Prefix caching off: `--enable-prefix-caching` (setting `enable_prefix_caching`). On: put the
shared part of the prompt first and keep it byte-identical across requests (setting
`prompt_prefix`); variable content (dates, ids, retrieved text) goes after it.

Options:
min_hit_rate: prefix-cache hit rate below which it fires (vllm-doctor's default)
min_queries: fewer looked-up tokens are too few to judge

Example:
LD503 prefix-cache-efficiency: 12 % of 48,210 prompt tokens looked up hit the prefix cache ->
keep the shared prompt prefix byte-identical.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.checking.contract import Fire, NotApplicable, Pass, Result, check
from doctor.checklib import Setting, engine_setting, is_off, rerun, vllm_flag
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import MetricsWindow
from doctor.evidence import RunRecord
from doctor.foundation.units import fmt_pct
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass


@dataclass(frozen=True)
class Found:
    """Prompt tokens looked up in the prefix cache and those that hit, and whether caching is on."""

    hits: float
    queries: float
    enabled: Setting | None

    @property
    def rate(self) -> float:
        return self.hits / self.queries


@check(code="LD503", name="prefix-cache-efficiency", symptom=SymptomClass.GENERAL, cause=Cause.CACHE)
def prefix_cache_efficiency(
    metrics_window: MetricsWindow,
    log_facts: LogFacts | None = None,
    run: RunRecord | None = None,
    *,
    min_hit_rate: float = 0.5,
    min_queries: float = 1000.0,
) -> Result:
    hits, queries = metrics_window.prefix_cache_hits, metrics_window.prefix_cache_queries
    if hits is None or queries is None:
        return NotApplicable("the prefix-cache counters are not in /metrics")
    if queries < min_queries:
        return NotApplicable(_few_lookups(queries))
    found = Found(hits, queries, engine_setting("enable_prefix_caching", log_facts, run))
    if found.rate >= min_hit_rate:
        return Pass(_hits_enough(found))
    return Fire(
        felt=False,  # an opportunity, not a wait users had
        title="Few prompt tokens come from the prefix cache",
        summary=_summary(found),
        remediation=_remediation(found, min_hit_rate),
        severity=Severity.INFO,
        evidence=_evidence(found),
    )


def _few_lookups(queries: float) -> str:
    return f"only {queries:.0f} prompt tokens were looked up in the prefix cache"


def _hits_enough(found: Found) -> str:
    return f"{fmt_pct(found.rate)} of {found.queries:,.0f} looked-up prompt tokens hit the prefix cache"


def _summary(found: Found) -> str:
    return f"{fmt_pct(found.rate)} of {found.queries:,.0f} prompt tokens looked up hit the prefix cache"


def _evidence(found: Found) -> list[EvidenceValue]:
    evidence = [
        EvidenceValue("prefix cache hit rate", round(found.rate, 4), "",
                      "metrics: prefix_cache_hits / prefix_cache_queries deltas"),
        EvidenceValue("prefix cache queries", found.queries, "tokens", "metrics: vllm:prefix_cache_queries_total delta"),
        EvidenceValue("prefix cache hits", found.hits, "tokens", "metrics: vllm:prefix_cache_hits_total delta"),
    ]
    if found.enabled is not None:
        evidence.append(found.enabled.evidence("enable_prefix_caching"))
    return evidence


def _remediation(found: Found, min_hit_rate: float) -> Remediation:
    if found.enabled is not None and is_off(found.enabled.value):
        return Remediation(
            setting="enable_prefix_caching",
            suggested="true",
            current=str(found.enabled.value),
            where=vllm_flag("enable_prefix_caching"),
            why="Prefix caching is off, so shared prompt prefixes are prefilled again for every request.",
            verify=rerun("a higher prefix cache hit rate and lower server TTFT for prompts sharing a prefix"),
        )
    return Remediation(
        setting="prompt_prefix",
        suggested="shared part first, byte-identical across requests",
        where="the application that builds the prompts (system prompt, few-shot block, tools)",
        why=(
            "Prefix caching only reuses an identical leading run of tokens: anything that varies "
            "(a timestamp, a user id) early in the prompt makes every later token a miss."
        ),
        verify=rerun(f"a prefix cache hit rate above {fmt_pct(min_hit_rate)} for production-like prompts"),
    )
