"""The dependency directions the architecture rests on, checked on the import statements.

Every import counts: top-level, inside a function, and under ``TYPE_CHECKING``. A lazy import
hides a cycle from Python, not from a reader: both modules still need each other.

checks -> doctor.{checking.contract, evidence, derive, model}; reports -> doctor.model; doctor never
imports a check; renderers never import a probe or a check; checks never import a probe.
Inside ``doctor``: the shared foundations import no stage; probes never import derived views or the collector; the check toolkit
(``doctor.checklib``) and the verdict (``doctor.verdict``) are as pure as the checks, and the
verdict's wording never reads its decision nor the reverse; the parser packages never
import a probe; the lab never calls back into the CLI or the renderers, and only the ``demo``
command reaches into the lab. And no module, through any chain, imports itself, nor any folder
(``checks``, ``reports``, each package of ``doctor`` at any depth) another that imports it back.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("doctor", "checks", "reports")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@cache
def modules() -> dict[str, Path]:
    """Every module of the three packages, by dotted name."""
    return {module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))}


def imported_modules(path: Path) -> set[str]:
    """The modules ``path`` imports, absolute or relative, wherever the statement sits.

    ``from package import name`` names the submodule ``package.name`` when there is one, so that
    an edge points at the module that is really loaded.
    """
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            subs = {f"{base}.{alias.name}" for alias in node.names} & modules().keys()
            names.update(subs or {base})
            if subs != {f"{base}.{alias.name}" for alias in node.names}:
                names.add(base)
    return names - {""}


def graph() -> dict[str, set[str]]:
    """Module -> the modules of the three packages it imports."""
    known = modules().keys()
    return {name: {m for m in imported_modules(path) if m in known and m != name} for name, path in modules().items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_cycle_finder_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_graph_sees_lazy_and_type_checking_imports():
    # runner imports the verdict at top level; the CLI imports the demo command inside demo_cmd
    edges = graph()
    assert "doctor.verdict" in edges["doctor.checking.runner"]
    assert "doctor.commands.demo" in edges["doctor.cli"]


#: (modules under this prefix, may not import these prefixes, except the modules under these)
RULES = [
    ("doctor", ("checks", "reports"), {"doctor.commands"}),
    ("reports", ("checks", "doctor.probes", "doctor.collection", "doctor.lab"), set()),
    ("checks", ("doctor.probes", "doctor.collection", "doctor.lab", "reports"), set()),
    ("doctor.probes", ("doctor.derive", "doctor.collection"), set()),
    # the check toolkit is as pure as the checks that use it
    ("doctor.checklib", ("doctor.probes", "doctor.collection", "doctor.lab", "doctor.checking.runner", "doctor.commands", "doctor.cli"), set()),
    # the verdict is as pure as the checks whose results it reads
    ("doctor.verdict", ("doctor.collection", "doctor.lab", "doctor.checking.runner", "doctor.commands", "doctor.cli"), set()),
    ("doctor.logscan", ("doctor.probes", "doctor.engine_readers"), set()),
    ("doctor.engine_metrics", ("doctor.probes",), set()),
    # the engines' records sit below every parser package, which all read them
    ("doctor.engines", ("doctor.logscan", "doctor.engine_metrics", "doctor.engine_readers", "doctor.probes",
                        "doctor.derive", "doctor.checklib"), set()),
    # the gateways' records sit below the gateway view and the remediations, which both read them
    ("doctor.gateways", ("doctor.derive", "doctor.checklib", "doctor.probes", "doctor.collection", "doctor.commands",
                         "doctor.cli"), set()),
    ("doctor.lab", ("doctor.cli", "doctor.commands", "reports"), set()),
    # the eval gate's rules are as pure as the checks: its requests are a probe's
    ("doctor.verify", ("doctor.probes", "doctor.collection", "doctor.lab", "doctor.commands", "doctor.cli"), set()),
]


def under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


@pytest.mark.parametrize("package, forbidden, exempt", RULES, ids=[r[0] for r in RULES])
def test_import_direction(package, forbidden, exempt):
    offenders = []
    for name, path in modules().items():
        rel = path.relative_to(ROOT).as_posix()
        if not under(name, package) or any(under(name, e) for e in exempt):
            continue
        offenders += [f"{rel} imports {m}" for m in sorted(imported_modules(path)) if any(under(m, f) for f in forbidden)]
    assert not offenders, "\n".join(offenders)


def folders() -> tuple[str, ...]:
    """Every folder of the three packages as a dotted name: ``checks``, ``reports``, each package
    under ``doctor/`` at any depth (``doctor.probes.stream`` too); a module at the top of ``doctor/``
    (``doctor.model``, ``doctor.bundle``, ``doctor`` itself) stands alone, so that a chain through it
    is still seen."""
    found = {name.split(".")[0] for name in modules() if not under(name, "doctor")}
    found |= {".".join(name.split(".")[:2]) for name in modules() if under(name, "doctor")}
    found |= {name for name, path in modules().items() if path.name == "__init__.py"}
    return tuple(sorted(found))


def folder_graph(edges: dict[str, set[str]], folders: tuple[str, ...]) -> dict[str, set[str]]:
    """``edges`` collapsed onto ``folders``: a folder imports another when one of its modules does.

    A module belongs to the longest folder it is under, so that ``doctor`` (the package's
    ``__init__``) does not swallow ``doctor.runs``."""
    by_length = sorted(folders, key=len, reverse=True)

    def folder(name: str) -> str | None:
        return next((f for f in by_length if under(name, f)), None)

    collapsed: dict[str, set[str]] = {f: set() for f in folders}
    for name, targets in edges.items():
        if (source := folder(name)) is not None:
            collapsed[source] |= {t for m in targets if (t := folder(m)) is not None and t != source}
    return collapsed


def test_folder_graph_sees_a_folder_cycle():
    edges = {"p.a": {"q.b"}, "q.b": set(), "q.c": {"p.d"}, "p.d": set()}
    assert cycles(folder_graph(edges, ("p", "q"))) == [["p", "q"]]
    # a module belongs to its longest folder: p.q.x importing p.y and back is a cycle of p.q and p
    assert cycles(folder_graph({"p.q.x": {"p.y"}, "p.y": {"p.q.z"}, "p.q.z": set()}, ("p", "p.q"))) == [["p", "p.q"]]


def test_every_folder_is_a_node():
    units = folders()
    packages = {module_name(p.parent) for p in (ROOT / "doctor").rglob("__init__.py")}
    assert "doctor.probes.stream" in packages
    assert packages <= set(units) and {"checks", "reports", "doctor", "doctor.model"} <= set(units)


def test_no_folder_cycle():
    """No folder needs another that needs it back, through any chain (issue 34: ``doctor.runs``
    and ``doctor.settings`` did, for ``Practical``, and the test then saw only four folders; the
    endpoints probe in ``doctor.probes`` read the event loop from inside ``doctor.probes.stream``)."""
    found = cycles(folder_graph(graph(), folders()))
    assert not found, "folder cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


#: The verdict's modules, numbers first and words last: the wording never reads the decision, and
#: what the decision weighs (witnesses, decompositions, remedies) never reads the wording.
VERDICT_NUMBERS = ("felt", "failures", "split", "cases", "remedy", "missing")
VERDICT_WORDS = ("wording", "headline")


def test_the_verdict_keeps_its_wording_apart_from_its_decision():
    imports = {name: imported_modules(path) for name, path in modules().items() if under(name, "doctor.verdict")}
    words = {f"doctor.verdict.{m}" for m in VERDICT_WORDS}
    assert {f"doctor.verdict.{m}" for m in (*VERDICT_NUMBERS, *VERDICT_WORDS, "decide")} <= imports.keys()
    offenders = [f"{name} imports {m}" for name in (f"doctor.verdict.{n}" for n in VERDICT_NUMBERS)
                 for m in imports[name] if m in words or m == "doctor.verdict.decide"]
    offenders += [f"{name} imports doctor.verdict.decide" for name in words if "doctor.verdict.decide" in imports[name]]
    assert not offenders, "\n".join(offenders)


def test_the_foundations_are_leaves():
    """``doctor.foundation`` holds what every stage uses, so it may use nothing of a stage."""
    offenders = [f"{name} imports {m}" for name, path in modules().items() if under(name, "doctor.foundation")
                 for m in sorted(imported_modules(path)) if under(m, "doctor") and not under(m, "doctor.foundation")]
    assert not offenders, "\n".join(offenders)


def test_only_the_demo_command_imports_the_lab():
    """The lab (a simulator) serves the demo; the diagnosis engine never depends on it.

    ``doctor.commands.demo`` is the one module outside the lab that imports it, and the CLI
    imports that module only inside ``demo_cmd``, so no other command loads the lab.
    """
    lab_importers = {
        name for name, path in modules().items()
        if not under(name, "doctor.lab") and any(under(m, "doctor.lab") for m in imported_modules(path))
    }
    assert lab_importers == {"doctor.commands.demo"}
    demo_importers = {name for name, path in modules().items() if "doctor.commands.demo" in imported_modules(path)}
    assert demo_importers == {"doctor.cli"}
    assert _imports_outside(modules()["doctor.cli"], "doctor.commands.demo", "demo_cmd") == []


def _imports_outside(path: Path, module: str, function: str) -> list[int]:
    """Line numbers of imports of ``module`` in ``path`` that are not inside ``function``."""
    tree = ast.parse(path.read_text(), str(path))
    inside = {id(n) for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == function for n in ast.walk(f)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        if id(node) not in inside and any(under(m, module) for m in names):
            lines.append(node.lineno)
    return lines
