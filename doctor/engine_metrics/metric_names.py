"""Engine metric names across versions and engines, and the parse of one exposition into samples.

vLLM renamed its metrics several times (``gpu_cache_usage_perc`` -> ``kv_cache_usage_perc``,
``time_per_output_token_seconds`` -> ``inter_token_latency_seconds``, ``gpu_prefix_cache_*``
-> ``prefix_cache_*``) and exposed both names during each rename window. Each quantity the
doctor reads is a ``Family`` listing its names newest first, then the names other engines give
the same quantity (SGLang, llama.cpp's ``llama-server``, TGI, TensorRT-LLM's ``trtllm-serve``),
each engine's taken from its record (``doctor.engines``, ``EngineRecord.metrics``), so that every
check reads one vocabulary whichever engine answered; the first name that has samples wins. Matching is done on *sample* names, not on ``# TYPE`` families, because the
scrapes people paste (and some exporters) drop the ``# TYPE`` lines, and prometheus_client then
turns every sample into an untyped family of its own.

Each record names the source of its engine's names. A quantity an engine does not expose is
simply absent from its names, and the window says it is missing.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from doctor.engines import RECORDS
from doctor.engines.names import engine_of_metrics

#: Labels that identify where a sample comes from; every other label is a sub-key or summed.
#: vLLM labels a data-parallel engine ``engine``; SGLang labels its schedulers ``dp_rank``
#: (each data-parallel rank is a scheduler of its own, with its own queue and KV pool).
ENGINE_LABELS = ("engine", "dp_rank")
ENGINE_LABEL = ENGINE_LABELS[0]
MODEL_LABEL = "model_name"


@dataclass(frozen=True)
class Family:
    """One quantity the doctor reads, with the metric names engines used for it, preferred first."""

    key: str  # the MetricsWindow field it fills
    kind: str  # "counter" | "histogram" | "gauge"
    names: tuple[str, ...]  # metric names as exposed, without _total/_bucket/_sum/_count
    sub_label: str | None = None  # a label kept apart (finished_reason), others are summed
    aggregate: str = "sum"  # how a gauge combines across engines: "sum" or "max"
    # A feature without which vLLM registers no such metric (speculative decoding): its absence
    # is the feature being off, not an older vLLM, so it is not listed in ``missing``.
    only_with: str | None = None
    # Only the samples with this label value (TGI's ``method="prefill"``), the label then dropped.
    label: tuple[str, str] | None = None
    # Whether its quantiles are read (the latencies): one read only for its largest bucket (the
    # step sizes) is worth no note when some observations lie above its largest bound.
    quantiles: bool = True


def _names(key: str) -> tuple[str, ...]:
    """Every engine's metric names for the quantity ``key``, vLLM's first (``EngineRecord.metrics``)."""
    return tuple(name for record in RECORDS for name in record.metrics.get(key, ()))


FAMILIES: tuple[Family, ...] = (
    # SGLang counts retracted requests; llama.cpp, TGI and trtllm-serve count none (trtllm has a
    # paused-requests gauge).
    Family("preemptions", "counter", _names("preemptions")),
    Family("finished_by_reason", "counter", _names("finished_by_reason"), sub_label="finished_reason"),
    Family("prompt_tokens", "counter", _names("prompt_tokens")),
    Family("generation_tokens", "counter", _names("generation_tokens")),
    Family("prefix_cache_hits", "counter", _names("prefix_cache_hits")),
    Family("prefix_cache_queries", "counter", _names("prefix_cache_queries")),
    Family("ttft", "histogram", _names("ttft")),
    Family("queue", "histogram", _names("queue")),
    Family("prefill", "histogram", _names("prefill")),
    # TGI's prefill steps, one observation per batch (router/src/infer/v3: ``tgi_batch_forward_duration``
    # by ``method``): with its queue time, what TGI's missing TTFT histogram is derived from
    # (``doctor.engine_metrics.derived``). No other engine has it, so its absence is not listed.
    Family("prefill_forward", "histogram", _names("prefill_forward"), only_with="TGI", label=("method", "prefill")),
    Family("decode", "histogram", _names("decode")),
    Family("itl", "histogram", _names("itl")),
    Family("e2e", "histogram", _names("e2e")),
    # The tokens of each engine step, prompt chunks and decodes together: the largest step tells
    # whether a smaller step budget would cut any (``checklib.step_budget``). vLLM's only.
    Family("step_tokens", "histogram", _names("step_tokens"), only_with="vLLM", quantiles=False),
    # KV usage is a fraction per engine: the window's total is the fullest engine, not a sum.
    Family("kv_usage", "gauge", _names("kv_usage"), aggregate="max"),
    Family("running", "gauge", _names("running")),
    # Speculative decoding (V0 0.5.4-0.9 spec_decode/metrics.py; V1 v1/spec_decode/metrics.py, engine-labelled
    # since 0.10.2): both expose ``_total``. V1 counts a draft per request per step; V0 had no drafts counter.
    Family("spec_draft_tokens", "counter", _names("spec_draft_tokens"), only_with="speculative decoding"),
    Family("spec_accepted_tokens", "counter", _names("spec_accepted_tokens"), only_with="speculative decoding"),
    Family("spec_drafts", "counter", _names("spec_drafts"), only_with="speculative decoding"),
    Family("waiting", "gauge", _names("waiting")),
)

FAMILY_BY_KEY: dict[str, Family] = {f.key: f for f in FAMILIES}


def _sample_index() -> dict[str, tuple[Family, str, str]]:
    """Exposed sample name -> (family, metric name, part). Parts: value, bucket, sum, count."""
    index: dict[str, tuple[Family, str, str]] = {}
    for family in FAMILIES:
        for name in family.names:
            if family.kind == "counter":
                # prometheus_client appends _total; aioprometheus (vLLM 0.2.x) did not.
                index[name + "_total"] = (family, name, "value")
                index[name] = (family, name, "value")
            elif family.kind == "histogram":
                for part in ("bucket", "sum", "count"):
                    index[f"{name}_{part}"] = (family, name, part)
            else:
                index[name] = (family, name, "value")
    return index


_INDEX = _sample_index()


@dataclass(frozen=True)
class Sample:
    """One sample of a known family, labels split into where it comes from and what it counts."""

    family: str  # Family.key
    metric: str  # the vLLM name it was exposed under (without suffix)
    part: str  # "value" | "bucket" | "sum" | "count"
    engine: str  # the ``engine`` (vLLM) or ``dp_rank`` (SGLang) label, "" when absent (one engine)
    model: str  # the ``model_name`` label, "" when absent
    sub: str  # the family's sub-label value (finished_reason), "" otherwise
    le: float | None  # bucket upper bound
    rest: tuple[tuple[str, str], ...]  # any other labels, kept so distinct series stay distinct
    value: float

    @property
    def series(self) -> tuple[object, ...]:
        """Identity of the time series this sample belongs to, across scrapes."""
        return (self.metric, self.part, self.engine, self.model, self.sub, self.le, self.rest)


class ExpositionError(ValueError):
    """The text is not a Prometheus exposition (HTML page, JSON error, garbage)."""


#: The longest exposition line handed to prometheus_client. Its label parser takes time quadratic
#: in a line's length (a 1 MB line: 6.7 s); a real line, even vLLM's ``cache_config_info`` with
#: every setting as a label, is a few KiB.
MAX_LINE_CHARS = 1 << 16


#: Distinct exposition texts whose parse is kept (``metric_families``): more than the scrapes of a
#: default diagnosis (~40), each ~200 KB of parsed samples for vLLM's ~50 KB exposition.
PARSES_KEPT = 128


@functools.lru_cache(maxsize=PARSES_KEPT)
def metric_families(text: str) -> tuple[Metric, ...]:
    """prometheus_client's families of ``text``, once no line is longer than ``MAX_LINE_CHARS``:
    a longer one raises ``ExpositionError`` (the scrape is then skipped, with this reason), and
    a syntax error raises prometheus_client's ``ValueError``.

    Kept per text (callers only read the families): the probe's scraper, its wedge watchdog and
    each check that reads the runtime counters, LoRA slots or the window read the same scrapes,
    and prometheus_client's parse (~6 ms for vLLM's exposition) was most of an analysis, done four
    times over (1.9 s for 40 scrapes on a 2-core machine, several times that on a starved one).
    Equal texts hit, so a bundle saved and read back reuses the parses made while it was collected.
    """
    for no, line in enumerate(text.split("\n"), 1):
        if len(line) > MAX_LINE_CHARS:
            raise ExpositionError(f"line {no} is {len(line):,} characters long, more than any exposition line "
                                  f"({MAX_LINE_CHARS:,}): not read")
    return tuple(text_string_to_metric_families(text))


def parse_exposition(text: str) -> tuple[list[Sample], str | None]:
    """The samples of known families in ``text``, and the engine whose families it declares
    (``doctor.engines.names``: ``vllm``, ``sglang``, ...), ``None`` when no engine's.

    ``_created`` series (prometheus_client's creation timestamps) never match a family and are
    dropped with every other unknown sample. NaN values are dropped too: they carry no amount;
    so are integers beyond a float's range (a 310-digit sample), which no reading can use.
    Raises ``ExpositionError`` with a short reason when the text does not parse.
    """
    samples: list[Sample] = []
    declared: list[str] = []
    try:
        for metric_family in metric_families(text):
            declared.append(metric_family.name)
            for s in metric_family.samples:
                hit = _INDEX.get(s.name)
                value = _amount(s.value)
                if hit is None or value is None:
                    continue
                family, metric, part = hit
                labels = dict(s.labels)
                if family.label is not None and labels.pop(family.label[0], None) != family.label[1]:
                    continue
                le = labels.pop("le", None) if part == "bucket" else None
                sub = labels.pop(family.sub_label, "") if family.sub_label else ""
                samples.append(
                    Sample(
                        family=family.key,
                        metric=metric,
                        part=part,
                        engine=engine_label(labels),
                        model=labels.pop(MODEL_LABEL, ""),
                        sub=sub,
                        le=float(le) if le is not None else None,
                        rest=tuple(sorted(labels.items())),
                        value=value,
                    )
                )
    except ExpositionError:
        raise
    except ValueError as exc:  # prometheus_client reports every syntax error as ValueError
        raise ExpositionError(f"not a Prometheus exposition: {_shorten(str(exc))}") from None
    return samples, engine_of_metrics(declared)


def engine_label(labels: dict[str, str]) -> str:
    """Pop and return the label that names the engine a sample comes from ("" when none)."""
    found = ""
    for name in ENGINE_LABELS:
        found = labels.pop(name, "") or found
    return found


def _amount(value: float) -> float | None:
    """A sample's value as a float; ``None`` for NaN or an integer no float can hold."""
    try:
        amount = float(value)
    except OverflowError:
        return None
    return None if math.isnan(amount) else amount


def _shorten(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
