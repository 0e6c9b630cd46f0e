"""Reading fields of a manifest that may be partial, mistyped or templated: every scaler record
reads through these, so a missing map, a list where a map belongs or a ``${...}`` placeholder is
an unset or unknown value, never an exception."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doctor.foundation.wire import dig, items, mapping
from doctor.scalers.model import PLACEHOLDER, Condition, Knob, ScalerStatus, quantity


def knob(obj: Any, path: str, default: Any = None, *, at: str | None = None) -> Knob:
    """The field at ``path`` (dotted, ``[i]`` for a list index) of ``obj`` as a ``Knob`` named ``at``
    (the path in the whole object, when ``obj`` is a part of it); ``default`` where it is unset."""
    value = dig(obj, *_steps(path))
    name = at or path
    if value is None:
        return Knob(name, default, explicit=False)
    if isinstance(value, str) and (found := PLACEHOLDER.search(value)):
        return Knob(name, value, placeholder=found.group(0))
    return Knob(name, value)


def annotation(annotations: Mapping[str, Any], key: str, path: str, default: Any = None) -> Knob:
    """An annotation's value as a knob at ``path["key"]`` (a key holds dots: no path walking)."""
    at = f'{path}["{key}"]'
    value = annotations.get(key)
    if value is None:
        return Knob(at, default, explicit=False)
    if isinstance(value, str) and (found := PLACEHOLDER.search(value)):
        return Knob(at, value, placeholder=found.group(0))
    return Knob(at, value)


def _steps(path: str) -> list[str | int]:
    steps: list[str | int] = []
    for part in path.split("."):
        name, _, rest = part.partition("[")
        if name:
            steps.append(name)
        while rest:
            index, _, rest = rest.partition("]")
            steps.append(int(index))
            rest = rest.lstrip("[")
    return steps


def where(obj: Mapping[str, Any]) -> tuple[str | None, str]:
    """The object's namespace (None when it names none) and name."""
    meta = mapping(obj, "metadata")
    namespace, name = meta.get("namespace"), meta.get("name")
    return (namespace if isinstance(namespace, str) else None), (name if isinstance(name, str) else "(unnamed)")


def group_of(api_version: Any) -> str:
    """``apps/v1`` -> ``apps``; ``v1`` (the core API) -> ``""``."""
    return api_version.rpartition("/")[0] if isinstance(api_version, str) else ""


def target_ref(ref: Any) -> tuple[str, str, str] | None:
    """(API group, kind, name) a ``scaleTargetRef`` names (a Deployment when it says no kind; the
    KEDA HTTP add-on's older ``deployment`` field too); None when it names nothing."""
    if not isinstance(ref, Mapping):
        return None
    name, kind = ref.get("name") or ref.get("deployment"), ref.get("kind") or "Deployment"
    if not isinstance(name, str) or not isinstance(kind, str):
        return None
    return group_of(ref.get("apiVersion") or "apps/v1"), kind, name


def target_of(ref: Any) -> str | None:
    """``Deployment/vllm`` from a ``scaleTargetRef``."""
    found = target_ref(ref)
    return None if found is None else f"{found[1]}/{found[2]}"


def as_int(value: Any) -> int | None:
    """An integer field's value; None for anything else (a boolean, a string, a float)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def conditions(status: Mapping[str, Any]) -> tuple[Condition, ...]:
    """A status's ``conditions`` as the controller wrote them (entries that are no objects skipped)."""
    return tuple(Condition(str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""),
                           str(c.get("message") or ""))
                 for c in items(status, "conditions") if isinstance(c, Mapping))


def status_of(obj: Mapping[str, Any], *, current: str = "currentReplicas", desired: str = "desiredReplicas") -> ScalerStatus | None:
    """The object's status as the controller wrote it; None when the object carries none."""
    status = mapping(obj, "status")
    if not status:
        return None
    return ScalerStatus(current=as_int(status.get(current)), desired=as_int(status.get(desired)),
                        conditions=conditions(status), last_scale_time=_text(status.get("lastScaleTime")))


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def uses_gpu(pod_spec: Any) -> bool:
    """Whether a pod spec's containers ask for a GPU (``nvidia.com/gpu``, ``amd.com/gpu``, ...)."""
    for container in items(pod_spec, "containers"):
        for section in ("limits", "requests"):
            if any(isinstance(k, str) and k.endswith("/gpu") for k in mapping(container, "resources", section)):
                return True
    return False


#: The engines' batch-limit flags on a container's command line: vLLM's and SGLang's.
BATCH_FLAGS = ("--max-num-seqs", "--max-running-requests")


def batch_limit(pod_spec: Any, at: str) -> Knob | None:
    """The engine's batch limit where a container's ``args`` or ``command`` set it
    (``--max-num-seqs 4`` or ``--max-num-seqs=4``), at its path; None where none does."""
    for i, container in enumerate(items(pod_spec, "containers")):
        for field in ("args", "command"):
            words = list(items(container, field))
            for j, word in enumerate(words):
                if not isinstance(word, str):
                    continue
                flag, eq, value = word.partition("=")
                if flag in BATCH_FLAGS:
                    raw = value if eq else (words[j + 1] if j + 1 < len(words) else None)
                    if quantity(raw) is not None:
                        return Knob(f"{at}.containers[{i}].{field}[{j}]", int(quantity(raw) or 0))
    return None
