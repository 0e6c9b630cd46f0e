"""vLLM's LoRA adapter slots, as ``vllm:lora_requests_info`` shows them in each /metrics scrape.

vLLM (0.6.4+, ``v1/metrics/loggers.py`` in 0.32) exports one gauge series per label set:
``max_lora`` (the ``--max-loras`` GPU slots), ``running_lora_adapters`` and
``waiting_lora_adapters`` (comma-separated adapter names of the requests running and waiting),
each set to the time it was last reported. Old label sets stay in the scrape until the server
restarts, so the current state is the series with the latest time. It shows activity, not
residency (an adapter idle in a slot is not listed: vllm#45325). Read apart from the metrics
window, whose families are numbers: this one's facts are in its labels. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from doctor.evidence.metrics import Scrape
from doctor.vllm_metrics.metric_names import metric_families

FAMILY = "vllm:lora_requests_info"


@dataclass(frozen=True)
class LoraSlots:
    """One scrape's adapter state: GPU slots, adapters of running and of waiting requests."""

    t: float  # the scrape's time on the probe's clock
    max_lora: int | None
    running: tuple[str, ...]
    waiting: tuple[str, ...]

    @property
    def shut_out(self) -> tuple[str, ...]:
        """Adapters whose requests wait while every slot holds another adapter: they wait for a slot,
        not for a batch seat (an adapter both running and waiting is already loaded)."""
        if self.max_lora is None or len(self.running) < self.max_lora:
            return ()
        return tuple(a for a in self.waiting if a not in self.running)


def lora_slots(scrapes: Sequence[Scrape]) -> list[LoraSlots]:
    """The adapter state of every scrape that carries the family, in scrape order; a scrape that
    does not parse is skipped (the metrics window reports it)."""
    out = []
    for scrape in scrapes:
        if scrape.error or FAMILY not in scrape.text:
            continue
        labels = _latest(scrape.text)
        if labels is not None:
            out.append(LoraSlots(t=scrape.t, max_lora=_int(labels.get("max_lora")),
                                 running=_names(labels.get("running_lora_adapters")),
                                 waiting=_names(labels.get("waiting_lora_adapters"))))
    return out


def _latest(text: str) -> dict[str, str] | None:
    """The labels of the family's series with the latest value (the time it was set)."""
    best: tuple[float, dict[str, str]] | None = None
    try:
        for family in metric_families(text):
            if family.name != FAMILY:
                continue
            for sample in family.samples:
                if best is None or sample.value > best[0]:
                    best = (sample.value, dict(sample.labels))
    except (ValueError, TypeError, IndexError, KeyError):
        return None
    return best[1] if best is not None else None


def _names(value: str | None) -> tuple[str, ...]:
    return tuple(n for n in (value or "").split(",") if n)


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
