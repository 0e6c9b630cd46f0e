"""A check decides, then speaks: its ``@check`` function builds no text (ruff's rule / ``message()`` split).

The decorated function works out what it found (numbers, names, settings) into a small frozen
record and returns through the module's phrasing functions (``_summary(found)``,
``_remediation(found)``, or methods of the record), kept apart from the decision: a change of rule
never steps around sentences, and a change of wording never touches the rule. Building text means
an f-string, ``.format``, ``sep.join``, or ``+`` / ``%`` with a string; a plain literal (a title,
a fixed ``Pass`` message, a setting's name) is a value, not built text. The snapshots in
``fixtures/checks/`` hold that the split changed no word.

The functions the decision reaches (called or passed on) are held to the same rule unless they
are phrasing functions, told by what they return: words (``speaks``). Every built-in check is
split; a new one is written that way (DEVELOPERS.md, "Adding a check").
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CHECKS = Path(__file__).resolve().parents[2] / "checks"

MODULES = sorted(p.stem for p in CHECKS.glob("*.py") if p.stem != "__init__")


def _is_text(node: ast.expr) -> bool:
    """A string literal, an f-string, or ``+`` / ``%`` of them: what text building starts from."""
    if isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str)):
        return True
    return isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)) and (
        _is_text(node.left) or _is_text(node.right))


def text_built(tree: ast.AST) -> list[str]:
    """Where ``tree`` builds text, as ``line N: how``, outermost first (an f-string's parts are not repeated)."""
    found: list[str] = []

    def visit(node: ast.AST) -> None:
        how = None
        if isinstance(node, ast.JoinedStr):
            how = "f-string"
        elif isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)) and _is_text(node):
            how = "string " + ("concatenation" if isinstance(node.op, ast.Add) else "% formatting")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and (
                node.func.attr == "format" or (node.func.attr == "join" and _is_text(node.func.value))):
            how = f"str.{node.func.attr}"
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format":
            how = "format()"
        if how is not None:
            found.append(f"line {getattr(node, 'lineno', '?')}: {how}")
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _is_check_decorator(node: ast.expr) -> bool:
    call = node.func if isinstance(node, ast.Call) else node
    return isinstance(call, ast.Name) and call.id == "check"


#: What a phrasing function returns: words (a sentence, a remediation, evidence, a scaling object's
#: fault as ``checklib.scaler_fire`` lists it) and their containers.
WORDS = frozenset({"str", "Remediation", "EvidenceValue", "ScalerFault", "list", "tuple", "Sequence"})


def speaks(fn: ast.FunctionDef) -> bool:
    """Whether ``fn`` is a phrasing function: its return annotation names words only (``str``,
    ``Remediation``, ``list[EvidenceValue]``...), or an optional sentence (``str | None``); a
    function returning a number, a record, a ``Result``, or words that may be ``None`` (whether
    there is a fault at all) decides."""
    if fn.returns is None:
        return False
    names = {n.id for n in ast.walk(fn.returns) if isinstance(n, ast.Name)}
    names |= {str(n.value) for n in ast.walk(fn.returns) if isinstance(n, ast.Constant)}
    return names <= WORDS or names == {"str", "None"}


def decisions(source: str) -> list[ast.FunctionDef]:
    """A check module's ``@check`` function and every module-level function it reaches (called or
    passed on, transitively) that is not a phrasing function."""
    tree = ast.parse(source)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    todo = [fn for fn in functions.values() if any(map(_is_check_decorator, fn.decorator_list))]
    seen: dict[str, ast.FunctionDef] = {}
    while todo:
        fn = todo.pop()
        if fn.name in seen:
            continue
        seen[fn.name] = fn
        todo += [functions[n.id] for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id in functions
                 and not speaks(functions[n.id])]
    return list(seen.values())


def _frozen_records(module: str) -> list[str]:
    """The module's ``@dataclass(frozen=True)`` classes: where a split check keeps what it found."""
    tree = ast.parse(_source(module))
    return [n.name for n in tree.body if isinstance(n, ast.ClassDef) and any(
        isinstance(d, ast.Call) and any(k.arg == "frozen" and isinstance(k.value, ast.Constant) and k.value.value
                                        for k in d.keywords) for d in n.decorator_list)]


def violations(source: str) -> list[str]:
    """Where a check module's decision builds text, as ``function line N: how``."""
    return [f"{fn.name} {where}" for fn in decisions(source) for statement in fn.body for where in text_built(statement)]


def _source(module: str) -> str:
    return (CHECKS / f"{module}.py").read_text()


@pytest.mark.parametrize("module", MODULES)
def test_the_decision_builds_no_text(module: str) -> None:
    assert decisions(_source(module)), f"checks/{module}.py has no @check function"
    built = violations(_source(module))
    assert not built, (f"checks/{module}.py builds text inside its decision ({'; '.join(built)}): record what "
                       "it found in a frozen dataclass and phrase it in functions apart from the decision")
    assert _frozen_records(module), f"checks/{module}.py keeps what it found in no @dataclass(frozen=True) record"


@pytest.mark.parametrize(("source", "how"), [
    ('x = f"{n} requests"', "f-string"),
    ('x = "{} requests".format(n)', "str.format"),
    ('x = demand[1].format(n)', "str.format"),
    ('x = "; ".join(parts)', "str.join"),
    ('x = "waiting " + str(n)', "string concatenation"),
    ('x = "%d waiting" % n', "string % formatting"),
    ('x = format(n, ".0f")', "format()"),
])
def test_every_way_of_building_text_is_seen(source: str, how: str) -> None:
    assert text_built(ast.parse(source)) == [f"line 1: {how}"]


@pytest.mark.parametrize("source", [
    'x = "a fixed message"',
    'x = n + 1',
    'x = _summary(found)',
    'parts.append(n)',
])
def test_values_and_phrasing_calls_are_not_text_building(source: str) -> None:
    assert text_built(ast.parse(source)) == []


HELPED = """
@check(code="LD999", name="x", symptom=S, cause=C)
def x(view):
    fault = _fault(view)
    return Fire(summary=_summary(fault), remediation=_remediation(fault))

def _fault(view) -> Fault | None:
    return Fault(view.n, note={note})

def _summary(fault: Fault) -> str:
    return f"{{fault.n}} waiting"

def _remediation(fault: Fault) -> Remediation:
    return Remediation(suggested=f"{{fault.n + 1}}")
"""


def test_a_helper_that_decides_is_held_to_the_rule_and_a_phrasing_one_is_not() -> None:
    assert violations(HELPED.format(note='"fixed"')) == []
    assert violations(HELPED.format(note='f"{view.n} seen"')) == ["_fault line 8: f-string"]


def test_optional_words_decide_whether_there_is_a_fault() -> None:
    """``ScalerFault | None`` says whether a fault exists: a decision, held to the rule; ``str | None``
    is an optional sentence."""
    source = HELPED.format(note='"fixed"').replace("-> Fault | None", "-> ScalerFault | None").replace(
        'note="fixed"', 'note=f"{view.n} seen"')
    assert violations(source) == ["_fault line 8: f-string"]
