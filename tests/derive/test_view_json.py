"""The views' JSON types (``doctor.derive.view_json``) hold to the views, so a renamed field fails here.

Renderers read ``Report.views`` through these ``TypedDict``s, and mypy (``tests/project/test_typecheck.py``)
rejects a key a ``TypedDict`` lacks. What is left to hold is that each ``TypedDict`` says what
the view really carries, and that the template, which mypy cannot read, asks only for keys
that exist:

- every key of a ``...Json`` is a field of its view's dataclass, with the JSON image of that
  field's type (a rename or a retype in ``stream_stats.py`` or ``user_felt.py`` fails here);
- the views of the recorded real-engine bundles have every key their type names, nested too
  (``serial.to_jsonable`` writes what the dataclass holds; ``SizingSummary`` is built by hand);
- every ``view.key`` the HTML template reads, through its loops too, is a key of that view;
- the JSON schema names each view's type by the same keys.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import json
import operator
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints, is_typeddict

import jsonschema
import pytest
from jinja2 import nodes

from doctor.bundle import load_path
from doctor.checking.runner import analyze
from doctor.derive import view_json
from doctor.derive.engine import EngineIdentity
from doctor.derive.request_hops import ClockAlignment, Hop, RequestHops, RequestHopsView
from doctor.derive.request_stalls import Behind, Stall
from doctor.derive.stream_stats import Dist, PathStats, RequestStats, StreamStats
from doctor.derive.user_felt import Estimate, UserFelt, Witness
from doctor.engine_metrics.views import EngineWindow, GaugeWindow, HistogramWindow, MetricsWindow
from doctor.evidence import ModelConfigEvidence
from doctor.logscan.parsed import Fact, LogFacts, Startup, StartupError, StatsPoint
from doctor.model import Report
from reports.html_page import environment
from reports.json_doc import render_json, report_schema
from tests.support.view_schema import VIEWS, view_defs, views_property

ROOT = Path(__file__).resolve().parents[2]
#: Recorded real-vLLM bundles that between them compute every view: a stream with a log and a
#: scrape, Prometheus history only, a buffering gateway, many users, a wedged engine, the engine's spans.
RECORDED = [ROOT / "fixtures" / "bundles" / f"realvllm-{name}.json.gz"
            for name in ("healthy", "history-queueing", "proxy-buffering", "users-kv-pressure", "engine-wedged", "traced-queueing",
                                  "traced-prefill-interference")]
TINY = ROOT / "fixtures" / "model-configs" / "tiny-llama-realvllm" / "config.json"

#: Each view dataclass and the TypedDict of its JSON.
MIRRORS: dict[type, Any] = {
    Dist: view_json.DistJson,
    RequestStats: view_json.RequestStatsJson,
    PathStats: view_json.PathStatsJson,
    StreamStats: view_json.StreamStatsJson,
    GaugeWindow: view_json.GaugeWindowJson,
    HistogramWindow: view_json.HistogramWindowJson,
    EngineWindow: view_json.EngineWindowJson,
    MetricsWindow: view_json.MetricsWindowJson,
    Fact: view_json.FactJson,
    StartupError: view_json.StartupErrorJson,
    StatsPoint: view_json.StatsPointJson,
    Startup: view_json.StartupJson,
    LogFacts: view_json.LogFactsJson,
    Estimate: view_json.EstimateJson,
    Witness: view_json.WitnessJson,
    UserFelt: view_json.UserFeltJson,
    EngineIdentity: view_json.EngineIdentityJson,
    Hop: view_json.HopJson,
    RequestHops: view_json.RequestHopsJson,
    ClockAlignment: view_json.ClockAlignmentJson,
    RequestHopsView: view_json.RequestHopsViewJson,
    Behind: view_json.BehindJson,
    Stall: view_json.StallJson,
}


def json_image(tp: Any) -> Any:
    """The type ``serial.to_jsonable`` turns a value of ``tp`` into: dataclasses into their mirror, enums into str."""
    if tp in MIRRORS:
        return MIRRORS[tp]
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        return str
    args = get_args(tp)
    if get_origin(tp) in (types.UnionType, typing.Union):
        return functools.reduce(operator.or_, [json_image(a) for a in args])
    if get_origin(tp) is dict:
        return dict[json_image(args[0]), json_image(args[1])]
    if get_origin(tp) is list:
        return list[json_image(args[0])]
    return tp


def test_view_names_are_the_views_the_report_carries() -> None:
    from doctor.derive import DERIVED

    assert set(get_args(view_json.ViewName)) == set(VIEWS) <= set(DERIVED)


def mismatches(cls: type, mirror: Any) -> list[str]:
    """Keys of ``mirror`` that ``cls`` has no field for, or whose type is not that field's JSON."""
    fields = get_type_hints(cls)
    return [f"{key}: {'no such field' if key not in fields else f'{tp} is not {json_image(fields[key])}'}"
            for key, tp in get_type_hints(mirror).items() if key not in fields or tp != json_image(fields[key])]


@pytest.mark.parametrize("cls", MIRRORS, ids=lambda c: c.__name__)
def test_each_json_key_is_a_field_of_its_view_with_the_same_type(cls: type) -> None:
    assert not mismatches(cls, MIRRORS[cls]), MIRRORS[cls].__name__


def test_the_window_twins_declare_their_shared_quantities_once() -> None:
    """``EngineWindow`` and ``MetricsWindow`` carry the same quantities (one engine's and the whole
    scrape's); their JSON declares them once, in ``WindowQuantitiesJson``. A quantity added to one
    window and not the other, or to both and not to the base, or missing from its JSON, fails here."""
    def typed(cls: type) -> set[tuple[str, Any]]:
        return {(f.name, f.type) for f in dataclasses.fields(cls)}

    shared = {name for name, _ in typed(EngineWindow) & typed(MetricsWindow)}
    assert shared == set(get_type_hints(view_json.WindowQuantitiesJson))
    for cls in (EngineWindow, MetricsWindow):
        assert {f.name for f in dataclasses.fields(cls)} == set(get_type_hints(MIRRORS[cls])), cls.__name__


def test_a_renamed_or_retyped_field_is_seen() -> None:
    """The comparison above fails for a view whose field was renamed (``p90``) or retyped (``n``)."""
    fields = [("p90_s" if f.name == "p90" else f.name, str if f.name == "n" else f.type) for f in dataclasses.fields(Dist)]
    changed = dataclasses.make_dataclass("Dist", fields)
    assert [m.split(":")[0] for m in mismatches(changed, view_json.DistJson)] == ["n", "p90"]


def conforms(value: Any, tp: Any, where: str) -> list[str]:
    """Where ``value`` (JSON) lacks a key that ``tp`` names, at any depth; a value of another kind too."""
    if tp is Any:
        return []
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        hints = get_type_hints(tp)
        out = [f"{where}.{k}: missing" for k in sorted(tp.__required_keys__ - set(value))]
        for k in sorted(set(hints) & set(value)):
            out += conforms(value[k], hints[k], f"{where}.{k}")
        return out
    args = get_args(tp)
    if get_origin(tp) in (types.UnionType, typing.Union):
        tries = [conforms(value, a, where) for a in args]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if tp is type(None):
        return [] if value is None else [f"{where}: not null"]
    if get_origin(tp) is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        return [e for i, item in enumerate(value) for e in conforms(item, args[0], f"{where}[{i}]")]
    if get_origin(tp) is dict:
        if not isinstance(value, dict):
            return [f"{where}: not an object"]
        return [e for k, item in value.items() for e in conforms(item, args[1], f"{where}[{k!r}]")]
    if tp is float:  # JSON has no NaN: a float that is not finite is written as null
        return [] if value is None or isinstance(value, (int, float)) else [f"{where}: not a number"]
    return [] if isinstance(value, tp) else [f"{where}: {type(value).__name__}, not {tp.__name__}"]


@functools.cache
def recorded_report(name: str) -> Report:
    bundle = load_path(ROOT / "fixtures" / "bundles" / name)
    bundle.model_config = ModelConfigEvidence(source=str(TINY), text=TINY.read_text())  # the sizing view too
    return analyze(bundle)


@pytest.mark.parametrize("name", [p.name for p in RECORDED])
def test_the_views_of_recorded_bundles_have_every_key_their_type_names(name: str) -> None:
    report = recorded_report(name)
    computed = {k: v for k, v in report.views.items() if k in VIEWS and set(v) != {"missing"}}
    assert "sizing" in computed, name
    problems = [p for k, v in computed.items() for p in conforms(v, VIEWS[k], k)]
    assert not problems, "\n".join(problems)


def test_the_recorded_bundles_show_each_view_and_its_optional_parts_somewhere() -> None:
    """So that the test above read every view, and the sizing's log comparison, at least once."""
    shown = {k for p in RECORDED for k, v in recorded_report(p.name).views.items() if set(v) != {"missing"}}
    assert set(VIEWS) <= shown
    assert any("log" in recorded_report(p.name).views["sizing"] for p in RECORDED)


# -- the template ---------------------------------------------------------------------------------

#: The template's variables that hold a view (``reports.html_page.render_html``).
TEMPLATE_VIEWS = {"stream_stats": view_json.StreamStatsJson, "metrics_window": view_json.MetricsWindowJson,
                  "log_facts": view_json.LogFactsJson, "sizing": view_json.SizingSummary}


#: What a template may call on a view's object without naming a key.
DICT_METHODS = ("get", "items", "keys", "values")


def _without_none(tp: Any) -> Any:
    args = [a for a in get_args(tp) if a is not type(None)] if get_origin(tp) in (types.UnionType, typing.Union) else [tp]
    return args[0] if len(args) == 1 else tp


class TemplateReads:
    """Walks a template, typing the expressions that start at a view; records every key it reads."""

    def __init__(self) -> None:
        self.reads: list[tuple[str, str, bool]] = []  # (type, key, exists)

    def key(self, tp: Any, key: str) -> Any:
        hints = get_type_hints(tp)
        self.reads.append((tp.__name__, key, key in hints))
        return _without_none(hints.get(key, Any))

    def type_of(self, node: nodes.Node, scope: dict[str, Any]) -> Any:
        if isinstance(node, nodes.Name):
            return scope.get(node.name, Any)
        if isinstance(node, nodes.Getattr):
            base = self.type_of(node.node, scope)
            if node.attr in DICT_METHODS and (is_typeddict(base) or get_origin(base) is dict):
                return ("method", node.attr, base)
            return self.key(base, node.attr) if is_typeddict(base) else Any
        if isinstance(node, nodes.Or):  # ``(e.kv_usage or {})``
            return self.type_of(node.left, scope)
        if isinstance(node, nodes.Call):
            method = self.type_of(node.node, scope)
            if isinstance(method, tuple) and method[1] == "items":
                return ("items", get_args(method[2])[1])
            if isinstance(method, tuple) and method[1] == "get" and is_typeddict(method[2]) and isinstance(node.args[0], nodes.Const):
                return self.key(method[2], node.args[0].value)
        return Any

    def walk(self, node: nodes.Node, scope: dict[str, Any]) -> None:
        if isinstance(node, nodes.For):
            self.type_of(node.iter, scope)
            inner = dict(scope)
            iterated = self.type_of(node.iter, scope)
            item = (iterated[1] if isinstance(iterated, tuple) and iterated[0] == "items"
                    else get_args(iterated)[0] if get_origin(iterated) in (list, dict) else Any)
            if isinstance(node.target, nodes.Tuple):
                inner[node.target.items[-1].name] = item  # ``for name, p in view.paths.items()``
            elif isinstance(node.target, nodes.Name):
                inner[node.target.name] = item
            for child in node.body + node.else_:
                self.walk(child, inner)
            if node.test is not None:
                self.walk(node.test, inner)
            return
        if isinstance(node, (nodes.Getattr, nodes.Call)):
            self.type_of(node, scope)
        for child in node.iter_child_nodes():
            self.walk(child, scope)


def template_reads() -> list[tuple[str, str, bool]]:
    env = environment()
    source = env.loader.get_source(env, "report.html.j2")[0]
    walker = TemplateReads()
    walker.walk(env.parse(source), dict(TEMPLATE_VIEWS))
    return walker.reads


def test_every_key_the_html_template_reads_exists_on_its_view() -> None:
    reads = template_reads()
    assert not [(tp, key) for tp, key, exists in reads if not exists]
    # the walk follows the loops: what the per-engine and stats tables read is seen, not only the top level
    assert {("EngineWindowJson", "model_name"), ("StatsPointJson", "kv_usage_pct"), ("PathStatsJson", "http_version"),
            ("GaugeWindowJson", "max"), ("SizingSummary", "notes")} <= {(tp, key) for tp, key, _ in reads}


def test_the_template_walk_sees_a_key_no_view_has() -> None:
    env = environment()
    walker = TemplateReads()
    walker.walk(env.parse("{% for k, e in metrics_window.engines.items() %}{{ e.model }}{% endfor %}{{ log_facts.sorce }}"),
                dict(TEMPLATE_VIEWS))
    assert [(tp, key) for tp, key, exists in walker.reads if not exists] == [("EngineWindowJson", "model"),
                                                                            ("LogFactsJson", "sorce")]


# -- the schema -----------------------------------------------------------------------------------

def test_the_schema_names_each_view_by_its_types_keys() -> None:
    """The published schema's ``views`` and ``view_*`` definitions are the ones the types generate
    (``python -m tests.support.view_schema`` prints them after a type changed)."""
    schema = report_schema()
    assert schema["properties"]["views"] == views_property()
    generated = view_defs()
    stale = sorted(name for name, definition in generated.items() if schema["$defs"].get(name) != definition)
    assert not stale, f"reports/schema/report.schema.json differs from the view types in {stale}"
    assert not sorted(n for n in schema["$defs"] if n.startswith("view_") and n not in generated)


@pytest.mark.parametrize("name", [p.name for p in RECORDED])
def test_the_json_reports_of_recorded_bundles_validate_with_their_views(name: str) -> None:
    data = json.loads(render_json(recorded_report(name)))
    jsonschema.Draft202012Validator(report_schema()).validate(data)


def test_the_schema_rejects_a_view_that_lost_a_key() -> None:
    data = json.loads(render_json(recorded_report(RECORDED[0].name)))
    del data["views"]["stream_stats"]["paths"]["direct"]["ttft"]["p90"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(report_schema()).validate(data)
