"""The serving process's own runtime counters in raw scrapes, and the engine's prompt tokens, at each scrape.

``prometheus_client``'s default collectors put the serving process's Python runtime and process
facts beside the engine's families: ``python_gc_collections_total{generation}``,
``process_start_time_seconds``, ``process_cpu_seconds_total``. They are no engine quantity (no
``doctor.engine_metrics.metric_names`` family: they say nothing of the engine's work, and under vLLM v1
they are the API server process's, not the engine core's), but they time an engine-wide pause:
a full (generation 2) collection stops every stream the process serves. The engine's prompt-token
counter is read per scrape too, so a freeze can be bracketed: did a prompt arrive during it?
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from doctor.engine_metrics.metric_names import metric_families
from doctor.engine_metrics.window import parse_scrape
from doctor.evidence import Scrape

GC_COLLECTIONS = "python_gc_collections_total"
START_TIME = "process_start_time_seconds"
CPU_SECONDS = "process_cpu_seconds_total"


@dataclass(frozen=True)
class Reading:
    """One usable scrape's runtime counters (None: not in it)."""

    t: float  # the probe's clock
    wall: float
    gc_full: float | None  # python_gc_collections_total{generation="2"}
    started: float | None  # process_start_time_seconds (unix time)
    cpu_s: float | None  # process_cpu_seconds_total
    prompt_tokens: float | None  # the engine's prompt-token counter, summed over engines


def readings(scrapes: Sequence[Scrape]) -> list[Reading]:
    """Every usable scrape's reading, in time order; a scrape that does not parse is skipped."""
    out: list[Reading] = []
    for scrape in sorted(scrapes, key=lambda s: s.t):
        parsed, _ = parse_scrape(scrape)
        if parsed is None:
            continue
        runtime: dict[str, float] = {}
        try:
            for family in metric_families(scrape.text):
                for s in family.samples:
                    if s.name == GC_COLLECTIONS and s.labels.get("generation") == "2":
                        runtime[GC_COLLECTIONS] = runtime.get(GC_COLLECTIONS, 0.0) + float(s.value)
                    elif s.name in (START_TIME, CPU_SECONDS) and s.name not in runtime:
                        runtime[s.name] = float(s.value)
        except ValueError:  # parse_scrape accepted it, so this does not happen; a reading without runtime if it does
            runtime = {}
        prompts = [s.value for s in parsed.samples if s.family == "prompt_tokens"]
        out.append(Reading(t=scrape.t, wall=scrape.wall, gc_full=runtime.get(GC_COLLECTIONS),
                           started=runtime.get(START_TIME), cpu_s=runtime.get(CPU_SECONDS),
                           prompt_tokens=sum(prompts) if prompts else None))
    return out


def between(series: Sequence[Reading], start: float, end: float, field: Callable[[Reading], float | None]) -> float | None:
    """How much ``field`` grew from the last reading at or before ``start`` to the first at or after
    ``end`` (the scrapes that bracket an interval); None without both, or without the field in both."""
    before = [r for r in series if r.t <= start]
    after = [r for r in series if r.t >= end]
    if not before or not after:
        return None
    a, b = field(before[-1]), field(after[0])
    return None if a is None or b is None else b - a
