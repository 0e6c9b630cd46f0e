"""Where a compiled pattern can begin a match: the shape that makes a search quadratic.

``re.search`` tries a pattern from every position of its text. When the first thing the pattern
can match is an unbounded repeat (``\\d+``, ``\\s*``, ``[A-Za-z]+``), each try inside a long run of
that class reads on to the run's end before failing: n tries of n steps. A lookbehind or an
anchor first (``(?<!\\d)\\d+``, ``\\b``, ``^``) lets only the run's start try, which keeps the search
linear. ``leading_unbounded`` finds the unguarded ones, from the pattern's parse tree (Python's
own ``re`` parser, private but stable across 3.10-3.13), so a test can hold the patterns we search
to that shape without timing anything.
"""

from __future__ import annotations

import re
import sys
from typing import Any

if sys.version_info >= (3, 11):
    from re import _constants as sc
    from re import _parser as sp
else:  # pragma: no cover - exercised on 3.10 only
    import sre_constants as sc
    import sre_parse as sp

_GUARDS = (sc.AT, sc.ASSERT, sc.ASSERT_NOT)
_REPEATS = (sc.MAX_REPEAT, sc.MIN_REPEAT)


def _nullable(items: Any) -> bool:
    """Whether ``items`` can match the empty string (so what follows can begin the match)."""
    for op, av in items:
        if op in _GUARDS:
            continue
        if op is sc.SUBPATTERN and _nullable(av[-1]):
            continue
        if op is sc.BRANCH and any(_nullable(b) for b in av[1]):
            continue
        if op in _REPEATS and (av[0] == 0 or _nullable(av[2])):
            continue
        return False
    return True


def _leading(items: Any) -> list[tuple[Any, Any]]:
    """The items that can be the first to match; a guard ends a branch (it is what protects it)."""
    out: list[tuple[Any, Any]] = []
    for op, av in items:
        if op in _GUARDS:
            return out
        if op is sc.SUBPATTERN:
            out += _leading(av[-1])
            if not _nullable(av[-1]):
                return out
            continue
        if op is sc.BRANCH:
            for branch in av[1]:
                out += _leading(branch)
            if not any(_nullable(b) for b in av[1]):
                return out
            continue
        if op in _REPEATS:
            out.append((op, av))
            out += _leading(av[2])
            if av[0] > 0 and not _nullable(av[2]):
                return out
            continue
        return out
    return out


def leading_unbounded(pattern: re.Pattern[str]) -> bool:
    """Whether ``pattern`` can begin a match with an unguarded unbounded repeat."""
    return any(av[1] == sc.MAXREPEAT for _, av in _leading(sp.parse(pattern.pattern, pattern.flags)))
