"""How vLLM prints a value, read back: the items of a config or ``Namespace(...)`` repr
(``split_items``), a dict literal (``dict_literal``), one printed value (``literal_value``), counts,
decimals, device and version numbers. Apart from the parse loop because they know nothing of startups
or facts, and because other engines' readers print the same reprs (``doctor.engine_readers.sglang``).
"""

from __future__ import annotations

import ast
import re
from typing import Any

from doctor.foundation.wire import number

_DIGITS = re.compile(r"[-+]?\d+")
_KEY_AHEAD = re.compile(r"\w+=(?!=)")  # "key=" after a space separates items printed without a comma


def split_items(body: str) -> list[tuple[str, str]]:
    """Top-level ``key=value`` items of a config or ``Namespace(...)`` repr.

    Items are separated by a comma, or by a space before ``key=`` (0.6.3/0.6.4 printed
    "chunked_prefill_enabled=%s multi_step_stream_outputs=%s" with no comma), outside brackets
    and quotes only: ``SpeculativeConfig(draft_model='m', num_spec_tokens=5)`` is one value.
    Hand-written because the text is a repr of objects that are not Python literals
    (``torch.bfloat16``, ``<CompilationMode.X: 2>``, ``KernelConfig(...)``) and is often cut
    by an excerpt or a line-length limit: unless the closing bracket is reached, the last item
    may be cut and is dropped.
    """
    items: list[str] = []
    openers: list[str] = []
    quote = ""
    start = 0
    complete = False
    i = 0
    while i < len(body):
        ch = body[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{" or (ch == "<" and body[i + 1 : i + 2].isalpha()):  # <Enum.X: 2>
            openers.append(ch)
        elif ch == ">" and openers and openers[-1] == "<":
            openers.pop()
        elif ch in ")]}":
            if not openers:
                complete = True
                break
            openers.pop()
        elif not openers and (ch == "," or (ch == " " and _KEY_AHEAD.match(body, i + 1))):
            items.append(body[start:i])
            start = i + 1
        i += 1
    if complete:
        items.append(body[start:i])
    pairs: list[tuple[str, str]] = []
    for item in items:
        key, sep, value = item.strip().partition("=")
        if sep and key.isidentifier():
            pairs.append((key, value.strip()))
    return pairs


def dict_literal(body: str) -> dict[str, Any]:
    """``{'key': value, ...}``: a Python literal when whole, else its readable items."""
    try:
        value = ast.literal_eval(body)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = None
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    return {key: literal_value(raw) for key, raw in split_items(re.sub(r"'(\w+)': ", r"\1=", body[1:]))}


def literal_value(raw: str) -> Any:
    """A printed value as a number, boolean, string, list or dict where it reads as one."""
    raw = raw.strip()
    try:
        return ast.literal_eval(raw)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        pass
    if _DIGITS.fullmatch(raw):  # a number literal_eval refused: past Python's 4,300-digit limit, no value
        return None
    if raw.startswith("torch."):
        return raw[len("torch."):]
    if enum := re.fullmatch(r"[A-Z]\w*\.([A-Z][A-Z0-9_]*)", raw):  # LoadFormat.AUTO
        return enum[1].lower()
    return raw


def as_count(text: str) -> int | None:
    """A count as the log prints it (``1,024``), bounded (``doctor.foundation.wire.number``): ``None`` when
    beyond any real count, and the fact is then not kept."""
    return number(text.replace(",", ""), int)


def as_float(text: str) -> float | None:
    """A decimal as the log prints it, bounded like ``as_count``."""
    return number(text)


def as_device(name: str) -> str:
    """The KV cache's device as one name: ``GPU`` for cuda, upper case, a composite (``CPU+GPU``) as printed."""
    return "GPU" if name.lower() in ("gpu", "cuda") else name if "+" in name else name.upper()


def version_tuple(version: Any) -> tuple[int, ...] | None:
    """``0.11.2`` -> ``(0, 11, 2)``, for comparing releases; ``None`` when it reads as no version."""
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", str(version or ""))
    return tuple(n for g in match.groups() if g is not None and (n := as_count(g)) is not None) if match else None
