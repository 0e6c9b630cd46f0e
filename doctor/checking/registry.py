"""Finding checks: every module of the ``checks`` package, plus the ``llm_doctor.checks`` entry points.

No central list: a check exists because its file does. A third-party distribution exposes
checks with an entry point whose object is a module (all its ``CheckSpec`` attributes load)
or a single ``CheckSpec``. A plugin that fails to import, or that claims a code, name or alias
already taken, is a warning in the report, not a crash: the built-in catalogue always wins.
Two built-in checks claiming the same code, name or alias is a bug in llm-doctor and an error.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from types import ModuleType

from doctor.checking.contract import CheckSpec
from doctor.foundation.errors import UsageError

ENTRY_POINT_GROUP = "llm_doctor.checks"
CATALOGUE_HINT = "`llm-doctor checks` lists them"


@dataclass
class Registry:
    """The loaded catalogue: built-in checks first, then the plugins that did not clash, and a warning
    for each plugin dropped, which the report carries so a broken plugin is said, not a crash.
    """

    checks: list[CheckSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def find(self, key: str) -> CheckSpec | None:
        """A check by code (``LD101``, case-insensitive), name (``requests-queued``) or alias (``queueing``)."""
        return next((spec for spec in self.checks if spec.is_named(key)), None)

    def select(self, select: list[str] | None, ignore: list[str] | None) -> list[CheckSpec]:
        """Ruff-style selection: codes or code prefixes (``LD1``), names or aliases; ``ALL`` selects all.

        A key that matches no check is a ``UsageError``: a typo in ``--select`` would otherwise
        run nothing and report HEALTHY, and one in ``--ignore`` would silently ignore nothing.
        """

        def matches(spec: CheckSpec, key: str) -> bool:
            return key.upper() == "ALL" or spec.code.startswith(key.upper()) or spec.is_named(key)

        for flag, keys in (("--select", select), ("--ignore", ignore)):
            unknown = [k for k in keys or [] if not any(matches(s, k) for s in self.checks)]
            if unknown:
                raise UsageError(
                    f"{flag} {', '.join(map(repr, unknown))} matches no check "
                    f"(give a code, a code prefix such as LD1, a name, or ALL); {CATALOGUE_HINT}"
                )
        chosen = [s for s in self.checks if not select or any(matches(s, k) for k in select)]
        return [s for s in chosen if not ignore or not any(matches(s, k) for k in ignore)]


def _specs_in(module: ModuleType) -> list[CheckSpec]:
    return [v for v in vars(module).values() if isinstance(v, CheckSpec)]


def load_registry(package: str = "checks", plugins: bool = True) -> Registry:
    """Every check of ``package``, then the entry-point plugins that do not clash with them.

    Built-ins are registered first so that a plugin can never shadow or replace one: a plugin
    check reusing a taken code, name or alias is dropped with a warning (like a plugin that fails to
    import), while a clash among built-ins raises ``UsageError`` because it is our own bug.
    """
    reg = Registry()
    pkg = importlib.import_module(package)
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{package}.{info.name}")
        reg.checks.extend(_specs_in(module))
    claimed = _claims(reg.checks)
    if plugins:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - a broken plugin must not take the run down
                reg.warnings.append(f"check plugin {ep.name!r} failed to load: {exc}")
                continue
            specs = [obj] if isinstance(obj, CheckSpec) else _specs_in(obj) if isinstance(obj, ModuleType) else []
            if not specs:
                reg.warnings.append(f"check plugin {ep.name!r} exposes no check")
            for spec in specs:
                spec.origin = ep.dist.name if ep.dist else ep.name
                taken = [key for key in spec.keys if key in claimed]
                if taken:
                    reg.warnings.append(
                        f"check plugin {ep.name!r}: {spec.code} {spec.name} dropped, "
                        f"{' and '.join(map(repr, taken))} already belongs to {claimed[taken[0]]}"
                    )
                    continue
                claimed.update(dict.fromkeys(spec.keys, spec.module))
                reg.checks.append(spec)
    reg.checks.sort(key=lambda s: s.code)
    return reg


def _claims(specs: list[CheckSpec]) -> dict[str, str]:
    """Code, name and aliases -> defining module; two built-ins claiming one key is an error."""
    seen: dict[str, str] = {}
    for spec in specs:
        for key in spec.keys:
            if key in seen:
                raise UsageError(f"two checks claim {key!r}: {seen[key]} and {spec.module}")
            seen[key] = spec.module
    return seen
