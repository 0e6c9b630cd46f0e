"""The two kinds of value an engine's JSON self-description states a setting in, read strictly:
a positive integer, or a non-empty string. Shared by the records' readers (``SelfReport.read``)
and ``doctor.engines.server_info``."""

from __future__ import annotations

from typing import Any


def count(value: Any) -> int | None:
    """A positive integer setting; anything else (``null``: automatic, ``-1``: off) is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None
