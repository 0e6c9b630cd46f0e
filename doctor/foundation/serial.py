"""Dataclass <-> JSON-compatible dict conversion for the evidence bundle and the report.

Written here rather than taken from pydantic or cattrs because the design card keeps the
runtime dependencies to six libraries, and the bundle only needs what dataclasses already
describe: nested dataclasses, lists, dicts with string keys, optionals, enums and primitives.
Loading is lenient in the direction that matters for old bundles: unknown keys are ignored
and absent keys take the field's default, so a newer llm-doctor re-analyses an older bundle.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import enum
import math
import types
import typing
from functools import cache
from typing import Any, TypeVar, Union, get_args, get_origin, get_type_hints

from doctor.foundation.wire import clean

T = TypeVar("T")


def to_jsonable(obj: Any) -> Any:
    """Turn dataclasses, enums and containers into plain JSON-compatible values.

    The exact inverse of ``from_jsonable`` for every value the wire can put in a field: strings
    lose lone surrogates (``wire.clean``: no UTF-8 can carry them), and a float that is not
    finite is written as ``null`` (JSON has no NaN or infinity; read back, a plain ``float``
    field is NaN, "unknown", and an optional one ``None``).
    """
    if isinstance(obj, str):
        return clean(obj)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, dict):
        return {clean(str(k)): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def from_jsonable(tp: Any, data: Any, path: str = "") -> Any:
    """Rebuild a value of type ``tp`` from what ``to_jsonable`` produced.

    Every leaf is checked against its declared type and a mismatch raises ``TypeError`` naming
    the field path (``stream.requests[2].ttft_s``): a hand-edited or damaged bundle must fail
    here, as one clear message, not later inside a check, the classifier or a renderer.
    ``bool`` is not accepted for numbers, nor a string for anything but ``str``; an ``int`` is a
    fine ``float``, and ``None`` for a plain ``float`` is how ``to_jsonable`` wrote NaN.
    """
    origin = get_origin(tp)
    if tp is Any:
        return data
    if origin is Union or origin is types.UnionType:
        args = [a for a in get_args(tp) if a is not type(None)]
        if data is None and len(args) < len(get_args(tp)):
            return None
        for arg in args:
            if _matches(arg, data):
                return from_jsonable(arg, data, path)
        raise _mismatch(tp, data, path)
    if data is None:
        if tp is float:
            return float("nan")
        raise _mismatch(tp, data, path)
    if origin in (list, tuple, typing.Sequence, collections.abc.Sequence):
        if not isinstance(data, list):
            raise _mismatch(tp, data, path)
        (item,) = get_args(tp)[:1] or (Any,)
        return [from_jsonable(item, v, f"{path}[{i}]") for i, v in enumerate(data)]
    if origin is dict:
        if not isinstance(data, dict):
            raise _mismatch(tp, data, path)
        _, val = get_args(tp) or (str, Any)
        return {k: from_jsonable(val, v, _join(path, str(k))) for k, v in data.items()}
    if origin is typing.Literal:
        if data not in get_args(tp):
            raise _mismatch(tp, data, path)
        return data
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        if not isinstance(data, dict):
            raise _mismatch(tp, data, path)
        hints = _hints(tp)
        kwargs = {
            f.name: from_jsonable(hints[f.name], data[f.name], _join(path, f.name))
            for f in dataclasses.fields(tp)
            if f.init and f.name in data
        }
        try:
            return tp(**kwargs)
        except TypeError as exc:  # a required field is absent
            raise TypeError(f"{path or tp.__name__}: {exc}") from None
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if isinstance(data, tp):  # a ``StrEnum`` member is its own JSON until it is dumped (``Report.views``)
            return data
        if not any(m.value == data and type(m.value) is type(data) for m in tp):
            raise _mismatch(tp, data, path)
        return tp(data)
    if not _matches(tp, data):
        raise _mismatch(tp, data, path)
    if tp is float:
        try:
            return float(data)
        except OverflowError:  # an integer such as 10**400: beyond any float
            raise TypeError(f"{path or 'the document'}: an integer beyond the range of a number") from None
    return data


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _mismatch(tp: Any, data: Any, path: str) -> TypeError:
    expected = getattr(tp, "__name__", None) if isinstance(tp, type) else None
    return TypeError(f"{path or 'the document'}: expected {expected or tp}, got {type(data).__name__}")


def _matches(tp: Any, data: Any) -> bool:
    """Whether ``data`` has the JSON shape of ``tp`` (picks a branch of a union, checks leaves)."""
    origin = get_origin(tp)
    if origin in (list, tuple):
        return isinstance(data, list)
    if origin is dict or (isinstance(tp, type) and dataclasses.is_dataclass(tp)):
        return isinstance(data, dict)
    if tp is float:
        return isinstance(data, (int, float)) and not isinstance(data, bool)
    if tp is int:
        return isinstance(data, int) and not isinstance(data, bool)
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return any(m.value == data for m in tp)
    if isinstance(tp, type):
        return isinstance(data, tp)
    return True


def load(cls: type[T], data: Any) -> T:
    """Typed entry point: ``load(Bundle, json.loads(text))``."""
    return typing.cast(T, from_jsonable(cls, data))
