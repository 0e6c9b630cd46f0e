"""What a scaler's PromQL query reads: each metric it selects, inside which functions and
aggregations, and whether its outermost aggregation sums over every replica.

Parsed with ``promql-parser`` (the Python binding of the Rust port of Prometheus' own parser):
a query is a language with precedence, grouping, subqueries and modifiers, which a regular
expression over its text would misread (``sum by (pod)`` against ``sum(...)``, a metric name
inside a label matcher's string).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import promql_parser

#: Functions that turn a cumulative counter into a per-second or per-window amount.
RATE_FUNCTIONS = frozenset({"rate", "irate", "increase", "delta", "idelta", "deriv", "changes", "resets"})

#: Labels that tell replicas apart: an aggregation that keeps one of these is per replica.
REPLICA_LABELS = frozenset({"pod", "pod_name", "instance", "kubernetes_pod_name", "replica", "container_id"})

#: Longest query read (a scaler's query is a line or two; a larger one is no query of ours).
MAX_QUERY = 16_384


@dataclass(frozen=True)
class Selection:
    """One metric the query selects, with the functions and aggregations around it, innermost first."""

    metric: str
    functions: tuple[str, ...] = ()
    aggregations: tuple[str, ...] = ()  # "sum", "sum by (pod)", "avg"

    @property
    def rated(self) -> bool:
        return any(f in RATE_FUNCTIONS for f in self.functions)


@dataclass(frozen=True)
class QueryShape:
    """What a query reads (``selections``), whether its outermost aggregation adds up every replica
    (``sums_replicas``: ``sum(x)`` or ``sum by (model) (x)``, not ``sum by (pod)`` nor ``avg``), and
    why it could not be read (``error``)."""

    selections: tuple[Selection, ...] = ()
    sums_replicas: bool = False
    error: str | None = None

    @property
    def metrics(self) -> list[str]:
        return list(dict.fromkeys(s.metric for s in self.selections))


@dataclass
class _Walk:
    selections: list[Selection] = field(default_factory=list)


def read_query(query: str) -> QueryShape:
    """The shape of ``query``; a query that does not parse has ``error`` set and nothing else."""
    if len(query) > MAX_QUERY:
        return QueryShape(error=f"a query of {len(query)} characters is longer than {MAX_QUERY}")
    try:
        expr = promql_parser.parse(query)
    except (ValueError, RuntimeError) as exc:  # the binding raises ValueError for a syntax error
        return QueryShape(error=str(exc).splitlines()[0][:200])
    walk = _Walk()
    _visit(expr, (), (), walk)
    return QueryShape(tuple(walk.selections), _sums_replicas(expr))


def _aggregation(node: Any) -> str:
    modifier = node.modifier
    op = str(node.op).lower()
    if modifier is None:
        return op
    kind = "by" if "by" in str(modifier.type).lower() else "without"
    return f"{op} {kind} ({', '.join(modifier.labels)})"


def _visit(node: Any, functions: tuple[str, ...], aggregations: tuple[str, ...], walk: _Walk) -> None:
    if isinstance(node, promql_parser.VectorSelector):
        if node.name:
            walk.selections.append(Selection(node.name, functions, aggregations))
        else:  # {__name__="..."}
            for matcher in node.matchers.matchers:
                if matcher.name == "__name__":
                    walk.selections.append(Selection(matcher.value, functions, aggregations))
    elif isinstance(node, promql_parser.MatrixSelector):
        _visit(node.vector_selector, functions, aggregations, walk)
    elif isinstance(node, promql_parser.Call):
        for arg in node.args:
            _visit(arg, (*functions, node.func.name), aggregations, walk)
    elif isinstance(node, promql_parser.AggregateExpr):
        _visit(node.expr, functions, (*aggregations, _aggregation(node)), walk)
    elif isinstance(node, promql_parser.BinaryExpr):
        _visit(node.lhs, functions, aggregations, walk)
        _visit(node.rhs, functions, aggregations, walk)
    elif isinstance(node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr):
        _visit(node.expr, functions, aggregations, walk)


def _sums_replicas(node: Any) -> bool:
    """Whether the value the query returns is a sum over replicas: its outermost aggregation (through
    parentheses and arithmetic with numbers) is ``sum`` that keeps no replica label."""
    while True:
        if isinstance(node, promql_parser.ParenExpr):
            node = node.expr
        elif isinstance(node, promql_parser.BinaryExpr):
            sides = [s for s in (node.lhs, node.rhs) if not isinstance(s, promql_parser.NumberLiteral)]
            if len(sides) != 1:
                return False
            node = sides[0]
        elif isinstance(node, promql_parser.Call) and node.func.name in ("ceil", "floor", "round", "abs", "clamp_min",
                                                                          "clamp_max", "clamp", "vector", "scalar"):
            node = node.args[0] if node.args else None
        else:
            break
    if not isinstance(node, promql_parser.AggregateExpr) or str(node.op).lower() != "sum":
        return False
    modifier = node.modifier
    if modifier is None:
        return True
    keeps = set(modifier.labels)
    if "without" in str(modifier.type).lower():
        return bool(keeps & REPLICA_LABELS)  # ``sum without (pod)`` drops the replica label: a sum over them
    return not keeps & REPLICA_LABELS


def label_of(selector: str, label: str) -> str | None:
    """The value a series selector (``{job="vllm", namespace="serving"}``) sets ``label`` to by
    equality; None when it does not, or the selector does not parse."""
    if not selector.strip() or len(selector) > MAX_QUERY:
        return None
    try:
        expr = promql_parser.parse(selector)
    except (ValueError, RuntimeError):
        return None
    if not isinstance(expr, promql_parser.VectorSelector):
        return None
    return next((m.value for m in expr.matchers.matchers if m.name == label and str(m.op) == "MatchOp.Equal"), None)

