"""Write check fixture cases: ``write_case`` for one case, ``write_all`` for a generator module.

A case's bundle is written sparse (``sparse``: fields at their defaults left out), so a reader
sees what the case sets up rather than every field of every request.

A generator (``tests/support/make_check_fixtures_*.py``) holds one ``cases_<check>`` function per
check, named for the check's module (``cases_proxy_buffering`` writes
``fixtures/checks/proxy-buffering/``); ``write_all`` finds them by that prefix, so a new check
adds one function and no list. ``writing_into`` points the writes at another folder: the
freshness test regenerates every fixture there and compares.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

from doctor.bundle import from_dict
from doctor.evidence import Bundle
from doctor.foundation.serial import to_jsonable

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "checks"
GENERATORS = (
    "tests.support.make_check_fixtures_engine",
    "tests.support.make_check_fixtures_capacity",
    "tests.support.make_check_fixtures_general",
    "tests.support.make_check_fixtures_proxy",
    "tests.support.make_check_fixtures_sizing",
    "tests.support.make_check_fixtures_edge",
    "tests.support.make_check_fixtures_scaling",
    "tests.support.make_check_fixtures_router",
    "tests.support.make_check_fixtures_structured",
    "tests.support.make_check_fixtures_gateway_limits",
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


def _at_default(f: dataclasses.Field[Any], value: Any) -> bool:
    if f.default is not dataclasses.MISSING:
        return type(value) is type(f.default) and value == f.default
    if f.default_factory is not dataclasses.MISSING:
        return bool(to_jsonable(value) == to_jsonable(f.default_factory()))
    return False  # a required field is always written


def sparse(obj: Any) -> Any:
    """``to_jsonable`` without the dataclass fields left at their defaults.

    The bundle loader gives an absent key its field's default, so the case reads back the same
    (``write_case`` checks it), and what remains is what the case is about. ``schema_version``
    stays: it says which bundle format the case was written in.
    """
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: sparse(getattr(obj, f.name)) for f in dataclasses.fields(obj)
                if f.name == "schema_version" or not _at_default(f, getattr(obj, f.name))}
    if isinstance(obj, dict):
        return {str(k): sparse(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [sparse(v) for v in obj]
    return to_jsonable(obj)


def write_case(check_name: str, case: str, bundle: Bundle, *, why: str, expect: dict[str, Any] | None = None,
               settings: dict[str, dict[str, Any]] | None = None) -> Path:
    path = _root[-1] / check_name / f"{case}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    written = sparse(bundle)
    if to_jsonable(from_dict(written, str(path))) != to_jsonable(bundle):
        raise AssertionError(f"{path}: the sparse bundle does not read back as the bundle it was written from")
    doc = {"_why": why, "expect": expect or {}, "settings": settings or {}, "bundle": written}
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
