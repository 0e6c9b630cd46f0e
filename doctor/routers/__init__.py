"""The routers llm-doctor reads, one record each, and the reading of a router's /metrics.

A router sits between the gateway and the engine replicas and chooses a replica per request.
Each product is one module holding one ``RouterRecord`` (``record``): ``vllm_router``,
``sglang_router``, ``llm_d_epp`` (the endpoint picker behind the Inference Gateway), ``litellm``.
Everything that lists routers is derived from ``RECORDS``: identification from a /metrics answer,
the family read for each quantity, the flag a remediation names, the docs' table. ``reading``
turns a router's scrapes into per-replica numbers, pure.
"""

from __future__ import annotations

from collections.abc import Iterable

from doctor.routers import litellm, llm_d_epp, sglang_router, vllm_router
from doctor.routers.record import QUANTITIES, SETTINGS, RouterRecord, RouterSetting

RECORDS: tuple[RouterRecord, ...] = (vllm_router.RECORD, sglang_router.RECORD, llm_d_epp.RECORD, litellm.RECORD)
BY_ID: dict[str, RouterRecord] = {r.id: r for r in RECORDS}


def identify(metric_names: Iterable[str]) -> RouterRecord | None:
    """The router whose families the names are (the one with most names); None when no router's."""
    counts = {r.id: 0 for r in RECORDS}
    for name in metric_names:
        for record in RECORDS:
            if record.names(name):
                counts[record.id] += 1
    best = max(counts, key=lambda k: counts[k])
    return BY_ID[best] if counts[best] else None


__all__ = ["BY_ID", "QUANTITIES", "RECORDS", "SETTINGS", "RouterRecord", "RouterSetting", "identify"]
