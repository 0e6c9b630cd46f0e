"""``StrEnum``: an enum whose members are their strings, in JSON, in comparisons and in print.

Python 3.11's ``enum.StrEnum``, written here because the package supports 3.10. A plain
``(str, Enum)`` member already equals its value and serialises as it, but an f-string or a
template prints it as ``Cause.QUEUE``; summaries, remediations and the HTML report name these
values to a reader, so a member prints as its value.
"""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """A str-valued enum that prints as its value (``f"{Cause.QUEUE}"`` is ``queue``)."""

    def __str__(self) -> str:
        return str.__str__(self)

    def __format__(self, format_spec: str) -> str:
        return str.__format__(self, format_spec)
