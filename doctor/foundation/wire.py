"""Strings and JSON from outside: servers, ``--payload`` files, bundles and reports someone attached.

One sanitising pass for everything parsed from JSON, because JSON can carry what Python's UTF-8
writer refuses and what the rest of the tool never expects:

- lone surrogates (``"\\ud800"`` is legal JSON, but no UTF-8 can encode it: the bundle write, the
  HTML page and the terminal all crash on it) become U+FFFD, the replacement character;
- nesting deeper than ``MAX_DEPTH`` (the parser itself overflows Python's stack around 1,000
  levels, and the redaction walk and the writer recurse well before that) is refused;
- integers longer than Python's 4,300-digit conversion limit, and text that is not JSON, are
  refused, as ``WireError`` (a ``ValueError``) with one line that says which.

``clean`` is the same replacement for a single string (the redaction pass applies it to every
string of a bundle, so a surrogate from the command line cannot crash the write either).

``number`` is the one conversion of a number from outside (a log line's digits, a scrape's
gauge, a config value, a server's token count): bounded before it is converted, so that neither
the conversion (``int()`` refuses more than 4,300 digits, and costs time quadratic in them) nor
later arithmetic (``float()`` of a huge integer, ``int()`` of an infinity) can raise.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, overload

#: Deeper than any document llm-doctor reads or writes (a bundle is about 6 levels, plus the
#: application's ``--payload``), shallow enough that every recursive walk stays far from the
#: interpreter's recursion limit.
MAX_DEPTH = 100

_SURROGATE = re.compile("[\ud800-\udfff]")
#: A JSON escape that decodes to a surrogate; without one, ``json.loads`` of text decoded from
#: bytes cannot produce a surrogate and the cleaning walk is skipped.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


#: The largest magnitude taken from outside: int64's range, which every engine counts in, and far
#: beyond any real count, size or duration; products of two such numbers are still finite floats.
MAX_NUMBER = 2**63
#: The longest text read as a number: a bounded number written out in full, with room for a sign,
#: a fraction and an exponent. Checked before converting, so the conversion's cost is bounded too.
MAX_NUMBER_TEXT = 40


class WireError(ValueError):
    """A document from outside that llm-doctor will not read; the message says why."""


def clean(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, so it can always be written as UTF-8."""
    return _SURROGATE.sub("\ufffd", text) if _SURROGATE.search(text) else text


@overload
def number(value: object, kind: type[int]) -> int | None: ...
@overload
def number(value: object, kind: type[float] = ...) -> float | None: ...
def number(value: object, kind: type[int] | type[float] = float) -> int | float | None:
    """``value`` (text, or a number already parsed by a TOML, JSON or exposition reader) as a
    ``kind``, or ``None`` when it is not a number, not finite, or beyond ``MAX_NUMBER``.

    A ``bool`` is not a number here (TOML and JSON booleans are Python ints). Text is read as
    Python reads it (``int("42")``, ``float("1e3")``); an ``int`` kind of a fractional text is
    ``None``, of a float value its whole part.
    """
    if isinstance(value, str):
        if len(value) > MAX_NUMBER_TEXT:
            return None
        try:
            parsed: int | float = int(value) if kind is int else float(value)
        except ValueError:
            return None
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        parsed = value
    else:
        return None
    if isinstance(parsed, float) and not math.isfinite(parsed):
        return None
    if not -MAX_NUMBER <= parsed <= MAX_NUMBER:  # int comparisons: exact, whatever the size
        return None
    return int(parsed) if kind is int else float(parsed)


def _refuse_constant(name: str) -> Any:
    raise WireError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise WireError(f"{text[:40]} is out of range for a number")
    return value


def loads(text: str | bytes, *, finite: bool = False) -> Any:
    """Parse JSON from outside, sanitised and bounded (see the module docstring).

    ``finite``: also refuse ``NaN``, ``Infinity`` and numbers beyond a float's range such as
    ``1e400``, where such a value would be silently analysed (a saved bundle).
    """
    options: dict[str, Any] = {"parse_constant": _refuse_constant, "parse_float": _finite} if finite else {}
    try:
        data = json.loads(text, **options)
    except json.JSONDecodeError as exc:
        raise WireError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    except RecursionError:
        raise WireError(f"JSON nested deeper than {MAX_DEPTH} levels") from None
    except WireError:
        raise
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise WireError(f"a number in the JSON is too large: {str(exc).split(';')[0]}") from None
    raw = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
    surrogates = bool(_SURROGATE_ESCAPE.search(raw))
    if not surrogates and raw.count("{") + raw.count("[") <= MAX_DEPTH:
        # no deeper than its brackets, nothing to clean: the walk is skipped. This is the common
        # case of every streamed event, where the walk cost more than json.loads (issue 25)
        return data
    return _sanitise(data, surrogates=surrogates)


def _sanitise(data: Any, *, surrogates: bool) -> Any:
    """Check the depth of ``data`` and, when it may hold surrogates, clean its strings in place.

    Iterative (an explicit stack), so the check itself cannot overflow on the input it refuses.
    """
    if isinstance(data, str):
        return clean(data) if surrogates else data
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise WireError(f"JSON nested deeper than {MAX_DEPTH} levels")
        if isinstance(node, dict):
            if surrogates and any(_SURROGATE.search(k) for k in node):
                items = [(clean(k), v) for k, v in node.items()]
                node.clear()
                node.update(items)
            keys: Any = list(node)
        elif isinstance(node, list):
            keys = range(len(node))
        else:
            continue
        for key in keys:
            value = node[key]
            if isinstance(value, str):
                if surrogates:
                    node[key] = clean(value)
            elif isinstance(value, (dict, list)):
                stack.append((value, depth + 1))
    return data


def dig(doc: Any, *keys: str | int) -> Any:
    """``doc[k1][k2]...`` of parsed JSON or YAML of any shape (an int key indexes a list); None where
    a level is missing or of another type, so a partial or mistyped document reads as absent values."""
    for key in keys:
        if isinstance(key, int):
            doc = doc[key] if isinstance(doc, list) and -len(doc) <= key < len(doc) else None
        else:
            doc = doc.get(key) if isinstance(doc, dict) else None
        if doc is None:
            return None
    return doc


def items(doc: Any, *keys: str | int) -> list[Any]:
    """The list at ``keys`` (``dig``), else no items."""
    value = dig(doc, *keys)
    return value if isinstance(value, list) else []


def mapping(doc: Any, *keys: str | int) -> dict[str, Any]:
    """The object at ``keys`` (``dig``), else an empty one."""
    value = dig(doc, *keys)
    return value if isinstance(value, dict) else {}

