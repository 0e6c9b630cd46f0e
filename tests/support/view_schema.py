"""The JSON Schema of the views, generated from their dataclasses (``doctor.derive.view_json.view_type``).

``reports/schema/report.schema.json`` carries these definitions under ``$defs`` (``view_*``)
and names them from ``views``; ``tests/derive/test_view_json.py`` compares the file with what this
module generates, so the published schema and the view dataclasses renderers read through say the
same keys: each field once, on its dataclass (``sizing``, a JSON document from the start, by its
``TypedDict``s). After changing a view's type, ``python -m tests.support.view_schema`` prints the
definitions to paste.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import re
import types
import typing
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

from doctor.derive.view_json import ViewName, view_type

#: ``Report.views`` key -> the type of that view (its dataclass; ``sizing``'s ``TypedDict``).
VIEWS: dict[str, Any] = {name: view_type(name) for name in get_args(ViewName)}

MISSING_VIEW = {"description": "A view that could not be computed, and why.", "type": "object", "required": ["missing"],
                "properties": {"missing": {"type": ["string", "null"]}}}

_SIMPLE = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


def def_name(tp: Any) -> str:
    """``StreamStats`` -> ``view_stream_stats`` (a ``TypedDict``'s ``Json`` suffix dropped)."""
    return "view_" + re.sub(r"(?<!^)(?=[A-Z])", "_", tp.__name__.removesuffix("Json")).lower()


def schema_of(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    """The schema of one field type; a dataclass or a ``TypedDict`` becomes a ``$ref``, its definition added to ``defs``."""
    if tp is Any:
        return {}
    if tp in _SIMPLE:
        return {"type": _SIMPLE[tp]}
    if isinstance(tp, type) and issubclass(tp, enum.Enum):  # ``serial.to_jsonable`` writes its value
        return {"type": _SIMPLE[type(next(iter(tp)).value)]}
    record = is_typeddict(tp) or dataclasses.is_dataclass(tp)
    if record:
        name = def_name(tp)
        if name not in defs:
            defs[name] = {}  # a placeholder while its fields are generated
            hints = get_type_hints(tp)
            required = tp.__required_keys__ if is_typeddict(tp) else {f.name for f in dataclasses.fields(tp)}
            defs[name] = {"description": " ".join((tp.__doc__ or "").strip().split("\n\n")[0].split()), "type": "object",
                          "required": sorted(required),
                          "properties": {k: schema_of(t, defs) for k, t in hints.items() if k in required or is_typeddict(tp)}}
        return {"$ref": f"#/$defs/{name}"}
    args = get_args(tp)
    if get_origin(tp) is list or (get_origin(tp) is tuple and args[1:] == (...,)):  # ``tuple[X, ...]`` is written as a list
        return {"type": "array", "items": schema_of(args[0], defs)}
    if get_origin(tp) is tuple:  # a pair such as a sample's ``(t, value)``
        return {"type": "array", "prefixItems": [schema_of(a, defs) for a in args], "minItems": len(args), "maxItems": len(args)}
    if get_origin(tp) is dict:
        return {"type": "object", "additionalProperties": schema_of(args[1], defs)}
    if get_origin(tp) in (types.UnionType, typing.Union):
        parts = [schema_of(a, defs) for a in args]
        if all(set(p) == {"type"} and isinstance(p["type"], str) for p in parts):
            return {"type": [p["type"] for p in parts]}
        return {"anyOf": parts}
    raise TypeError(f"no JSON Schema for {tp!r}")


def view_defs() -> dict[str, Any]:
    """Every ``view_*`` definition, ``missing_view`` among them."""
    defs: dict[str, Any] = {"missing_view": MISSING_VIEW}
    for tp in VIEWS.values():
        schema_of(tp, defs)
    return defs


def views_property() -> dict[str, Any]:
    """The report's ``views``: each view named here its type, or the reason it is missing."""
    return {
        "description": "Derived evidence, each view as its JSON or {\"missing\": reason}; the views named here are "
                       "what the renderers read (doctor/derive/view_json.py), and may grow.",
        "type": "object",
        "properties": {name: {"anyOf": [{"$ref": f"#/$defs/{def_name(tp)}"}, {"$ref": "#/$defs/missing_view"}]}
                       for name, tp in VIEWS.items()},
        "additionalProperties": {"type": "object"},
    }


if __name__ == "__main__":
    print(json.dumps({"views": views_property(), "$defs": view_defs()}, indent=2, ensure_ascii=False))
