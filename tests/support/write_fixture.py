"""Write check fixture cases: ``write_case`` for one case, ``write_all`` for a generator module.

A generator (``tests/support/make_check_fixtures_*.py``) holds one ``cases_<check>`` function per
check, named for the check's module (``cases_proxy_buffering`` writes
``fixtures/checks/proxy-buffering/``); ``write_all`` finds them by that prefix, so a new check
adds one function and no list. ``writing_into`` points the writes at another folder: the
freshness test regenerates every fixture there and compares.
"""

from __future__ import annotations

import contextlib
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from doctor.evidence import Bundle
from doctor.serial import to_jsonable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checks"
GENERATORS = (
    "tests.support.make_check_fixtures_engine",
    "tests.support.make_check_fixtures_capacity",
    "tests.support.make_check_fixtures_general",
    "tests.support.make_check_fixtures_proxy",
)
CASES_PREFIX = "cases_"

_root = [FIXTURES]  # where write_case writes: the committed fixtures unless writing_into says otherwise


@contextlib.contextmanager
def writing_into(root: Path) -> Iterator[Path]:
    """Write every case under ``root`` instead of ``fixtures/checks`` while the block runs."""
    _root.append(root)
    try:
        yield root
    finally:
        _root.pop()


def write_case(check_name: str, case: str, bundle: Bundle, *, why: str, expect: dict[str, Any] | None = None,
               settings: dict[str, dict[str, Any]] | None = None) -> Path:
    path = _root[-1] / check_name / f"{case}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {"_why": why, "expect": expect or {}, "settings": settings or {}, "bundle": to_jsonable(bundle)}
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path


def case_functions(module: ModuleType) -> dict[str, Callable[[], None]]:
    """``{check module name: its cases function}``, in the order the module defines them."""
    found = [
        (func.__code__.co_firstlineno, name.removeprefix(CASES_PREFIX), func)
        for name, func in vars(module).items()
        if name.startswith(CASES_PREFIX) and inspect.isfunction(func) and func.__module__ == module.__name__
    ]
    return {check: func for _, check, func in sorted(found)}


def write_all(module: ModuleType) -> None:
    """Run every ``cases_*`` function of a generator module."""
    for make in case_functions(module).values():
        make()
