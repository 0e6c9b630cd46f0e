"""vLLM's LoRA adapter slots, as ``vllm:lora_requests_info`` shows them in each /metrics scrape.

vLLM (0.6.4+, ``v1/metrics/loggers.py`` in 0.32) exports one gauge series per label set:
``max_lora`` (the ``--max-loras`` GPU slots), ``running_lora_adapters`` and
``waiting_lora_adapters`` (comma-separated adapter names of the requests running and waiting),
each set to the time it was last reported. Old label sets stay in the scrape until the server
restarts, so the current state is the series with the latest time. It shows activity, not
residency (an adapter idle in a slot is not listed: vllm#45325). Read apart from the metrics
window, whose families are numbers: this one's facts are in its labels. Pure.

Under vLLM v1 (0.32 read, and seen on the real CPU build) a request waiting for a slot is listed
nowhere, and the two lists are always equal: both are the adapters of the requests the API
server's output processor tracks (``LoRARequestStates.requests`` in ``v1/metrics/stats.py``),
and a request's QUEUED and SCHEDULED events reach it together with its first token, so it is
tracked from the moment it runs. ``waiting_lora_adapters`` then says nothing of waiting; what the
family still shows is which adapters were served, scrape by scrape (``served``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from doctor.engine_metrics.metric_names import metric_families
from doctor.evidence.metrics import Scrape

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


def served(states: Sequence[LoraSlots]) -> tuple[str, ...]:
    """Every adapter served (running) in any of ``states``, sorted: more of them than ``max_lora``
    over a window means adapters took turns in the slots."""
    return tuple(sorted({a for s in states for a in s.running}))


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
