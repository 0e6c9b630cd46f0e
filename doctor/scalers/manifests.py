"""Objects as ``kubectl get ... -o yaml`` (or ``-o json``) prints them, read from text a user gave:
one object, several documents, a ``kind: List``, or a Ray Serve config.

The text is untrusted, so it is bounded before it is parsed: a file over ``MAX_BYTES`` is refused
unread, YAML aliases that would expand past ``MAX_NODES`` (the "billion laughs") are refused
after composing and before constructing, and nesting too deep for the parser is one message. A
Helm chart's template (``{{ .Values.x }}``) is no YAML until rendered, and says so. PyYAML's safe
loader builds plain data only (no tags that run code).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from doctor.foundation import wire
from doctor.scalers.fields import group_of

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000
#: A Helm chart's own template actions: its values, release and helpers. Prometheus' alert text
#: (``{{ $labels.pod }}``, ``{{ with ... }}{{ end }}``) is a string of valid YAML, and stays one; any
#: other ``{{`` in a text that does not parse is taken for a template too (``_HELM_MESSAGE``).
HELM = re.compile(r"\{\{-?\s*(?:\.Values|\.Release|\.Chart|\.Capabilities|\.Files|\.Template|\$\.|include\b|toYaml\b|tpl\b)")
_HELM_MESSAGE = "a Helm template ({{ ... }}), not YAML until rendered: render it first with `helm template`"


class ManifestError(Exception):
    """The text is not objects llm-doctor can read; the message says why, in one line."""


@dataclass(frozen=True)
class Document:
    """One object of the text, with where it was (``file.yaml#2``: the second document) and its
    API group and kind (``keda.sh``, ``ScaledObject``; ``""`` for the core group)."""

    obj: Mapping[str, Any]
    source: str
    group: str
    kind: str


def documents(text: str, source: str) -> list[Document]:
    """Every object of ``text``; ``ManifestError`` when it cannot be read at all."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ManifestError(f"{source}: larger than {MAX_BYTES // (1024 * 1024)} MiB; refused unread")
    if HELM.search(text):
        raise ManifestError(f"{source}: {_HELM_MESSAGE}")
    parsed = _json(text, source) if text.lstrip()[:1] in ("{", "[") else None
    try:
        found = parsed if parsed is not None else _yaml(text, source)
    except ManifestError:
        if "{{" in text:
            raise ManifestError(f"{source}: {_HELM_MESSAGE}") from None
        raise
    out: list[Document] = []
    for index, obj in enumerate(found, start=1):
        label = source if len(found) == 1 else f"{source}#{index}"
        out += list(_flatten(obj, label))
    return out


def yaml_mapping(text: str, source: str) -> Mapping[str, Any] | None:
    """One YAML mapping held as text inside an object (a RayService's ``serveConfigV2``), read with
    the same bounds; None when it is not one."""
    try:
        found = _yaml(text, source)
    except ManifestError:
        return None
    return found[0] if len(found) == 1 and isinstance(found[0], Mapping) else None


def _json(text: str, source: str) -> list[Any] | None:
    try:
        value = wire.loads(text)
    except wire.WireError:
        return None  # YAML may still read it (a flow mapping)
    return value if isinstance(value, list) else [value]


def _yaml(text: str, source: str) -> list[Any]:
    try:
        nodes = list(yaml.compose_all(text, Loader=yaml.SafeLoader))
        budget = [MAX_NODES]
        for node in nodes:
            _count(node, budget, source)
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ManifestError(f"{source}: not YAML{where}: {problem}") from None
    except RecursionError:
        raise ManifestError(f"{source}: nested too deep to read") from None


def _count(node: Any, budget: list[int], source: str) -> None:
    """Visit the composed nodes, aliases followed, refusing past ``MAX_NODES`` visits."""
    stack = [node]
    while stack:
        budget[0] -= 1
        if budget[0] < 0:
            raise ManifestError(f"{source}: more than {MAX_NODES} nodes once its aliases are expanded: refused (a YAML alias bomb?)")
        current = stack.pop()
        if isinstance(current, yaml.SequenceNode):
            stack.extend(current.value)
        elif isinstance(current, yaml.MappingNode):
            for key, value in current.value:
                stack.extend((key, value))


def as_documents(obj: Any, source: str) -> list[Document]:
    """The objects one parsed object holds: itself, or a ``List``'s items."""
    return list(_flatten(obj, source))


def _flatten(obj: Any, source: str) -> Iterator[Document]:
    if not isinstance(obj, Mapping):
        return
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    if kind == "List" or (isinstance(kind, str) and kind.endswith("List") and isinstance(obj.get("items"), list)):
        for index, item in enumerate(obj.get("items") or [], start=1):
            yield from _flatten(item, f"{source} items[{index - 1}]")
        return
    if not isinstance(kind, str):
        if isinstance(obj.get("applications"), list):  # a Ray Serve config file
            yield Document(obj, source, "", "RayServeConfig")
        return
    yield Document(obj, source, group_of(api_version), kind)
