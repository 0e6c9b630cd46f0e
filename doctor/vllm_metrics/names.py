"""vLLM metric names across versions, and the parse of one exposition into normalised samples.

vLLM renamed its metrics several times (``gpu_cache_usage_perc`` -> ``kv_cache_usage_perc``,
``time_per_output_token_seconds`` -> ``inter_token_latency_seconds``, ``gpu_prefix_cache_*``
-> ``prefix_cache_*``) and exposed both names during each rename window. Each quantity the
doctor reads is a ``Family`` listing its names newest first; the first name that has samples
wins. Matching is done on *sample* names, not on ``# TYPE`` families, because the scrapes people
paste (and some exporters) drop the ``# TYPE`` lines, and prometheus_client then turns every
sample into an untyped family of its own.

Names come from ``fixtures/vllm-formats/metrics-definitions-by-version.md`` (0.1.7 to 0.33.0).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

#: Labels that identify where a sample comes from; every other label is a sub-key or summed.
ENGINE_LABEL = "engine"
MODEL_LABEL = "model_name"


@dataclass(frozen=True)
class Family:
    """One quantity the doctor reads, with the metric names vLLM used for it, preferred first."""

    key: str  # the MetricsWindow field it fills
    kind: str  # "counter" | "histogram" | "gauge"
    names: tuple[str, ...]  # metric names as exposed, without _total/_bucket/_sum/_count
    sub_label: str | None = None  # a label kept apart (finished_reason), others are summed
    aggregate: str = "sum"  # how a gauge combines across engines: "sum" or "max"
    # A feature without which vLLM registers no such metric (speculative decoding): its absence
    # is the feature being off, not an older vLLM, so it is not listed in ``missing``.
    only_with: str | None = None


FAMILIES: tuple[Family, ...] = (
    Family("preemptions", "counter", ("vllm:num_preemptions",)),
    Family("finished_by_reason", "counter", ("vllm:request_success",), sub_label="finished_reason"),
    Family("prompt_tokens", "counter", ("vllm:prompt_tokens",)),
    Family("generation_tokens", "counter", ("vllm:generation_tokens",)),
    Family("prefix_cache_hits", "counter", ("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits")),
    Family("prefix_cache_queries", "counter", ("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries")),
    Family("ttft", "histogram", ("vllm:time_to_first_token_seconds",)),
    Family("queue", "histogram", ("vllm:request_queue_time_seconds", "vllm:time_in_queue_requests")),
    Family("prefill", "histogram", ("vllm:request_prefill_time_seconds",)),
    Family("decode", "histogram", ("vllm:request_decode_time_seconds",)),
    Family("itl", "histogram", ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds")),
    Family("e2e", "histogram", ("vllm:e2e_request_latency_seconds",)),
    # KV usage is a fraction per engine: the window's total is the fullest engine, not a sum.
    Family("kv_usage", "gauge", ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"), aggregate="max"),
    Family("running", "gauge", ("vllm:num_requests_running",)),
    # Speculative decoding (V0 0.5.4-0.9 spec_decode/metrics.py; V1 v1/spec_decode/metrics.py, engine-labelled
    # since 0.10.2): both expose ``_total``. V1 counts a draft per request per step; V0 had no drafts counter.
    Family("spec_draft_tokens", "counter", ("vllm:spec_decode_num_draft_tokens",), only_with="speculative decoding"),
    Family("spec_accepted_tokens", "counter", ("vllm:spec_decode_num_accepted_tokens",), only_with="speculative decoding"),
    Family("spec_drafts", "counter", ("vllm:spec_decode_num_drafts",), only_with="speculative decoding"),
    Family("waiting", "gauge", ("vllm:num_requests_waiting",)),
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
    engine: str  # the ``engine`` label, "" when absent (V0, single engine)
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


def parse_exposition(text: str) -> tuple[list[Sample], bool]:
    """The samples of known vLLM families in ``text``, and whether any ``vllm:`` family was declared.

    ``_created`` series (prometheus_client's creation timestamps) never match a family and are
    dropped with every other unknown sample. NaN values are dropped too: they carry no amount;
    so are integers beyond a float's range (a 310-digit sample), which no reading can use.
    Raises ``ExpositionError`` with a short reason when the text does not parse.
    """
    samples: list[Sample] = []
    saw_vllm = False
    try:
        for metric_family in text_string_to_metric_families(text):
            saw_vllm = saw_vllm or metric_family.name.startswith("vllm:")
            for s in metric_family.samples:
                hit = _INDEX.get(s.name)
                value = _amount(s.value)
                if hit is None or value is None:
                    continue
                family, metric, part = hit
                labels = dict(s.labels)
                le = labels.pop("le", None) if part == "bucket" else None
                sub = labels.pop(family.sub_label, "") if family.sub_label else ""
                samples.append(
                    Sample(
                        family=family.key,
                        metric=metric,
                        part=part,
                        engine=labels.pop(ENGINE_LABEL, ""),
                        model=labels.pop(MODEL_LABEL, ""),
                        sub=sub,
                        le=float(le) if le is not None else None,
                        rest=tuple(sorted(labels.items())),
                        value=value,
                    )
                )
    except ValueError as exc:  # prometheus_client reports every syntax error as ValueError
        raise ExpositionError(f"not a Prometheus exposition: {_shorten(str(exc))}") from None
    return samples, saw_vllm


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
