"""Finding checks: every module of the ``checks`` package, plus the ``llm_doctor.checks`` entry points.

No central list: a check exists because its file does. A third-party distribution exposes
checks with an entry point whose object is a module (all its ``CheckSpec`` attributes load)
or a single ``CheckSpec``. A plugin that fails to import is a warning in the report, not a crash.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType

from doctor.check import CheckSpec
from doctor.errors import UsageError

ENTRY_POINT_GROUP = "llm_doctor.checks"


@dataclass
class Registry:
    checks: list[CheckSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def find(self, key: str) -> CheckSpec | None:
        """A check by code (``LD101``, case-insensitive) or name (``requests-queued``)."""
        for spec in self.checks:
            if key.upper() == spec.code or key.lower() == spec.name:
                return spec
        return None

    def select(self, select: list[str] | None, ignore: list[str] | None) -> list[CheckSpec]:
        """Ruff-style selection: codes or code prefixes (``LD1``), or names; ``ALL`` selects all."""

        def hit(spec: CheckSpec, keys: list[str]) -> bool:
            return any(
                k.upper() == "ALL" or spec.code.startswith(k.upper()) or spec.name == k.lower()
                for k in keys
            )

        chosen = [s for s in self.checks if not select or hit(s, select)]
        return [s for s in chosen if not ignore or not hit(s, ignore)]


def _specs_in(module: ModuleType) -> list[CheckSpec]:
    return [v for v in vars(module).values() if isinstance(v, CheckSpec)]


def load_registry(package: str = "checks", plugins: bool = True) -> Registry:
    reg = Registry()
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        reg.checks.extend(_specs_in(module))
    if plugins:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:  # a broken plugin must not take the run down
                reg.warnings.append(f"check plugin {ep.name!r} failed to load: {exc}")
                continue
            specs = [obj] if isinstance(obj, CheckSpec) else _specs_in(obj) if isinstance(obj, ModuleType) else []
            if not specs:
                reg.warnings.append(f"check plugin {ep.name!r} exposes no check")
            for spec in specs:
                spec.origin = ep.dist.name if ep.dist else ep.name
            reg.checks.extend(specs)
    _assert_unique(reg)
    reg.checks.sort(key=lambda s: s.code)
    return reg


def _assert_unique(reg: Registry) -> None:
    seen: dict[str, str] = {}
    for spec in reg.checks:
        for key in (spec.code, spec.name):
            if key in seen:
                raise UsageError(f"two checks claim {key!r}: {seen[key]} and {spec.module}")
            seen[key] = spec.module
