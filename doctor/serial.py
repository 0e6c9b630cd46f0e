"""Dataclass <-> JSON-compatible dict conversion for the evidence bundle and the report.

Written here rather than taken from pydantic or cattrs because the design card keeps the
runtime dependencies to six libraries, and the bundle only needs what dataclasses already
describe: nested dataclasses, lists, dicts with string keys, optionals, enums and primitives.
Loading is lenient in the direction that matters for old bundles: unknown keys are ignored
and absent keys take the field's default, so a newer llm-doctor re-analyses an older bundle.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Turn dataclasses, enums and containers into plain JSON-compatible values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and obj != obj:  # NaN is not JSON
        return None
    return obj


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def from_jsonable(tp: Any, data: Any) -> Any:
    """Rebuild a value of type ``tp`` from what ``to_jsonable`` produced."""
    if data is None:
        return None
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(tp) if a is not type(None)]
        for arg in args:
            if _matches(arg, data):
                return from_jsonable(arg, data)
        return from_jsonable(args[0], data) if args else data
    if origin in (list, tuple, typing.Sequence):
        (item,) = get_args(tp)[:1] or (Any,)
        return [from_jsonable(item, v) for v in data]
    if origin is dict:
        _, val = get_args(tp) or (str, Any)
        return {k: from_jsonable(val, v) for k, v in data.items()}
    if origin is typing.Literal or tp is Any:
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = _hints(tp)
        kwargs = {
            f.name: from_jsonable(hints[f.name], data[f.name])
            for f in dataclasses.fields(tp)
            if f.init and f.name in data
        }
        return tp(**kwargs)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return tp(data)
    if tp is float and isinstance(data, int):
        return float(data)
    return data


def _matches(tp: Any, data: Any) -> bool:
    """Whether ``data`` plausibly encodes ``tp`` (used to pick a branch of a union)."""
    origin = get_origin(tp)
    if origin in (list, tuple):
        return isinstance(data, list)
    if origin is dict or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return isinstance(data, dict)
    if tp is float:
        return isinstance(data, (int, float)) and not isinstance(data, bool)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return any(m.value == data for m in tp)
    if isinstance(tp, type):
        return isinstance(data, tp)
    return True


def load(cls: type[T], data: Any) -> T:
    """Typed entry point: ``load(Bundle, json.loads(text))``."""
    return typing.cast(T, from_jsonable(cls, data))
