"""The views' dataclasses are what the report's JSON carries, read back whole (``doctor.derive.view_json``).

Renderers, ``compare`` and a fleet's rows read ``Report.views`` through ``view``, which rebuilds each
view's dataclass from its JSON; mypy (``tests/project/test_typecheck.py``) rejects an attribute the
dataclass lacks. What is left to hold:

- the JSON of every view of the recorded real-engine bundles (and of real autoscaler objects and
  routers' /metrics) reads back into its dataclass and writes out again byte for byte (so the
  dataclass is all the JSON says, and nothing is lost);
- ``view``'s declared types are the derivations' own, and the field names a renderer picks by
  name (``DistKey``, ``GaugeKey``, ...) are fields of those types;
- every ``view.key`` the HTML template reads, through its loops too, is a field of that view;
- the JSON schema names each view by its dataclass's fields.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from pathlib import Path
from typing import Any, get_args, get_origin, get_overloads, get_type_hints, is_typeddict

import jsonschema
import pytest
from jinja2 import nodes

from doctor.bundle import from_dict, load_path
from doctor.checking.runner import AnalyzeOptions, analyze
from doctor.commands.scaling import gather
from doctor.derive import DERIVED, view_json
from doctor.derive.log_facts import LogFacts
from doctor.derive.metrics_window import GaugeWindow, HistogramWindow, MetricsWindow
from doctor.derive.router import RouterView
from doctor.derive.stream_stats import Dist, PathStats, StreamStats
from doctor.derive.view_json import view
from doctor.evidence import Bundle, ModelConfigEvidence
from doctor.foundation.serial import to_jsonable
from doctor.model import Report
from doctor.sizing.sizing_json import SizingSummary
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
#: The views no real-vLLM bundle holds (``scalers``, ``routing``), from the project's other real artifacts:
#: every real autoscaler object (``fixtures/autoscalers``, read as ``llm-doctor scaling`` reads files;
#: a Helm template among them, not read), and check fixtures of a live read (an HPA, its workload and
#: its pods), of an HPA whose conditions say it cannot read its metric, and of routers (vllm-router
#: 0.1.17's /metrics names and shape, with its flags; an ejected replica; a /metrics that names none).
AUTOSCALERS = ROOT / "fixtures" / "autoscalers"
CASES = [ROOT / "fixtures" / "checks" / case for case in (
    "replicas-pending/fires-unschedulable.json", "scaler-metric-unavailable/fires-failed-get-pods-metric.json",
    "router-hot-spot/fires-cache-aware-prefix.json", "router-retries/fires-ejected.json",
    "router-dead-replica/na-metrics-elsewhere.json")]
SOURCES = [p.name for p in RECORDED] + [AUTOSCALERS.name] + [f"{p.parent.name}/{p.name}" for p in CASES]
#: The view each source is there for: the bundles' sizing (with the model's config), the scalers, the router.
EXPECTED = {name: "routing" if name.startswith("router-") else "sizing" if name.startswith("realvllm-") else "scalers"
            for name in SOURCES}


def test_view_names_are_the_views_the_report_carries() -> None:
    assert set(get_args(view_json.ViewName)) == set(VIEWS) <= set(DERIVED)


def test_view_is_declared_with_the_types_the_derivations_return() -> None:
    """``view``'s overloads (what mypy reads) name, per view, the type its derivation returns (what it rebuilds)."""
    declared = {get_args(hints["name"])[0]: get_args(get_args(hints["return"])[0])[0]
                for hints in map(get_type_hints, get_overloads(view))}
    assert declared == {name: view_json.view_type(name) for name in get_args(view_json.ViewName)}


#: The field names a renderer picks by name, and the type each such field holds.
PICKED: list[tuple[Any, type, Any]] = [
    (view_json.DistKey, PathStats, Dist),
    (view_json.Quantile, Dist, float | None),
    (view_json.HistogramKey, MetricsWindow, HistogramWindow | None),
    (view_json.GaugeKey, MetricsWindow, GaugeWindow | None),
    (view_json.CounterKey, MetricsWindow, float | None),
]


@pytest.mark.parametrize(("names", "cls", "tp"), PICKED, ids=lambda x: getattr(x, "__name__", None) or str(x))
def test_each_field_picked_by_name_is_a_field_of_that_type(names: Any, cls: type, tp: Any) -> None:
    hints = get_type_hints(cls)
    assert {name: hints.get(name) for name in get_args(names)} == dict.fromkeys(get_args(names), tp)


@functools.cache
def recorded_report(name: str) -> Report:
    if name == AUTOSCALERS.name:
        return analyze(Bundle(tool_version="test", scaling=gather([str(AUTOSCALERS)])), AnalyzeOptions(select=["LD6"]))
    if "/" in name:
        return analyze(from_dict(json.loads((ROOT / "fixtures" / "checks" / name).read_text())["bundle"], name))
    bundle = load_path(ROOT / "fixtures" / "bundles" / name)
    bundle.model_config = ModelConfigEvidence(source=str(TINY), text=TINY.read_text())  # the sizing view too
    return analyze(bundle)


@pytest.mark.parametrize("name", SOURCES)
def test_the_views_of_recorded_bundles_read_back_into_their_dataclasses_unchanged(name: str) -> None:
    report = recorded_report(name)
    computed = {k: v for k, v in report.views.items() if k in VIEWS and set(v) != {"missing"}}
    assert EXPECTED[name] in computed, name
    for key, data in computed.items():
        value, missing = view(report, key)  # type: ignore[call-overload]  # every name, one at a time
        assert missing is None, key
        assert json.dumps(to_jsonable(value)) == json.dumps(data), key  # the same bytes: no int read back as a float


def test_the_recorded_bundles_show_each_view_and_its_optional_parts_somewhere() -> None:
    """So that the test above read every view, the sizing's log comparison, a scaler's status and pods and
    a router's settings and notes at least once."""
    views = [recorded_report(name).views for name in SOURCES]
    shown = {k for v in views for k, data in v.items() if set(data) != {"missing"}}
    assert set(VIEWS) <= shown
    assert any("log" in v["sizing"] for v in views)
    scalers = [s for v in views for s in v["scalers"].get("scalers", [])]
    assert any(s["status"] and s["status"]["conditions"] for s in scalers) and any(v["scalers"].get("pods") for v in views)
    routers = [v["routing"] for v in views if "replicas" in v["routing"]]
    assert any(r["settings"] and r["replicas"] for r in routers) and any(r["notes"] for r in routers)


def test_a_view_that_does_not_read_back_is_a_reason_not_a_traceback() -> None:
    report = recorded_report(RECORDED[0].name)
    damaged = dataclasses.replace(report, views={**report.views, "stream_stats": {**report.views["stream_stats"], "concurrency": "two"}})
    value, missing = view(damaged, "stream_stats")
    assert value is None and missing is not None and missing.startswith("stream_stats could not be read: concurrency")
    assert view(damaged, "log_facts")[0] == view(report, "log_facts")[0] and isinstance(view(report, "log_facts")[0], LogFacts)
    assert view(dataclasses.replace(report, views={}), "stream_stats") == (None, "stream_stats was not computed")


# -- the template ---------------------------------------------------------------------------------

#: The template's variables that hold a view (``reports.html_page.render_html``).
TEMPLATE_VIEWS = {"stream_stats": StreamStats, "metrics_window": MetricsWindow, "log_facts": LogFacts, "sizing": SizingSummary,
                  "router": RouterView}


#: What a template may call on a dict without naming a key.
DICT_METHODS = ("get", "items", "keys", "values")


def _is_record(tp: Any) -> bool:
    """A type whose values the template reads by key: a view's dataclass, or a ``TypedDict`` of ``sizing``."""
    return is_typeddict(tp) or (isinstance(tp, type) and dataclasses.is_dataclass(tp))


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
            return self.key(base, node.attr) if _is_record(base) else Any
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
    assert {("EngineWindow", "model_name"), ("StatsPoint", "kv_usage_pct"), ("PathStats", "http_version"),
            ("GaugeWindow", "max"), ("SizingSummary", "notes"), ("RouterView", "notes")} <= {(tp, key) for tp, key, _ in reads}


def test_the_template_walk_sees_a_key_no_view_has() -> None:
    env = environment()
    walker = TemplateReads()
    walker.walk(env.parse("{% for k, e in metrics_window.engines.items() %}{{ e.model }}{% endfor %}{{ log_facts.sorce }}"),
                dict(TEMPLATE_VIEWS))
    assert [(tp, key) for tp, key, exists in walker.reads if not exists] == [("EngineWindow", "model"),
                                                                            ("LogFacts", "sorce")]


# -- the schema -----------------------------------------------------------------------------------

def test_the_schema_names_each_view_by_its_types_keys() -> None:
    """The published schema's ``views`` and ``view_*`` definitions are the ones the dataclasses generate
    (``python -m tests.support.view_schema`` prints them after a type changed)."""
    schema = report_schema()
    assert schema["properties"]["views"] == views_property()
    generated = view_defs()
    stale = sorted(name for name, definition in generated.items() if schema["$defs"].get(name) != definition)
    assert not stale, f"reports/schema/report.schema.json differs from the view types in {stale}"
    assert not sorted(n for n in schema["$defs"] if n.startswith("view_") and n not in generated)


@pytest.mark.parametrize("name", SOURCES)
def test_the_json_reports_of_recorded_bundles_validate_with_their_views(name: str) -> None:
    data = json.loads(render_json(recorded_report(name)))
    jsonschema.Draft202012Validator(report_schema()).validate(data)


def test_the_schema_rejects_a_view_that_lost_a_key() -> None:
    data = json.loads(render_json(recorded_report(RECORDED[0].name)))
    del data["views"]["stream_stats"]["paths"]["direct"]["ttft"]["p90"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(report_schema()).validate(data)
