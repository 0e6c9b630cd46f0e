"""What llm-doctor knows about one autoscaler product, as one record: which objects are its, how
they read as the neutral ``Scaler``, and which API resource the live read lists.

Every table that lists scalers (the kinds ``llm-doctor scaling`` reads, the resources the live
read asks the Kubernetes API for and the RBAC it needs, the docs' table) is derived from the
records in ``doctor.scalers.RECORDS``, so adding a product is one module of this package plus its
real fixtures (``tests/scalers/test_records.py`` holds every record to the same questions).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from doctor.scalers.model import Scaler


@dataclass(frozen=True)
class ScalerRecord:
    """One autoscaler product.

    ``kinds``: the (API group, kind) pairs it reads (the group without its version: ``keda.sh``;
    ``""`` for a plain YAML document that is no Kubernetes object, as Ray Serve's config);
    ``read``: one object (and where it came from) -> the scalers it declares (a Ray Serve config
    declares one per autoscaled deployment); ``queue_signal``: how a remediation writes "scale on
    the engine's queue depth per replica" in this product (``{metric}``, ``{target}`` filled in); ``resources``: the (API group, plural, version) the
    live read lists, which ``deploy/kubernetes/fleet-rbac.yaml`` must grant; ``owner_labels``:
    (pod label, API group, kind) where the product labels the pods it runs with the name of its own
    object (Knative's ``serving.knative.dev/service``), so the live read finds that object from the
    pods without reading every owner in between; ``defaults``: the product's defaults the rules
    lean on, said in the docs; ``docs``: where its fields are defined.
    """

    id: str
    display: str
    kinds: tuple[tuple[str, str], ...]
    read: Callable[[Mapping[str, Any], str], list[Scaler]]
    queue_signal: str  # the engine's queue depth per replica in this product's words: {metric}, {target}
    resources: tuple[tuple[str, str, str], ...] = ()
    owner_labels: tuple[tuple[str, str, str], ...] = ()
    defaults: Mapping[str, str] | None = None
    docs: str = ""

    def reads(self, group: str, kind: str) -> bool:
        return (group, kind) in self.kinds
