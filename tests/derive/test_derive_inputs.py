"""Views that build on other views name them, and the resolver computes each one once per run.

``user_felt`` reads the probe's statistics and both metrics sources; ``metrics_window`` chooses
between the sources; ``sizing`` reads the log's facts. Each is parsed once, however many views
(and checks) read it.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

import doctor.derive.log_facts
import doctor.derive.stream_stats
import doctor.engine_metrics.history
import doctor.engine_metrics.window
from doctor.bundle import load_path
from doctor.checking.runner import views_of
from doctor.derive import DERIVED, INTERMEDIATE, VIEWS, Evidence, Missing, view_inputs
from doctor.evidence import Bundle, ModelConfigEvidence

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_every_input_a_derivation_names_is_a_view():
    for kind, derivation in VIEWS.items():
        assert next(iter(inspect.signature(derivation).parameters)) == "bundle", f"{kind}: the bundle comes first"
        unknown = [name for name in view_inputs(derivation) if name not in VIEWS]
        assert not unknown, f"{kind} builds on unknown views {unknown}"


def test_no_view_builds_on_itself_through_any_chain():
    def reaches(kind: str, seen: tuple[str, ...]) -> None:
        for name in view_inputs(VIEWS[kind]):
            assert name not in seen, " -> ".join((*seen, name))
            reaches(name, (*seen, name))

    for kind in VIEWS:
        reaches(kind, (kind,))


def test_intermediate_views_are_not_in_the_report():
    """Checks and renderers see the published views; the sources' windows stay inside derive."""
    assert not set(INTERMEDIATE) & set(DERIVED)
    views = views_of(Evidence(Bundle()))
    assert set(views) == set(DERIVED)


def both_sources() -> Bundle:
    """A probe run with /metrics scrapes, its log and, from another run, Prometheus history and a
    model config: every source a view reads, at once."""
    bundle = load_path(FIXTURES / "bundles" / "realvllm-queueing.json.gz")
    bundle.prometheus = load_path(FIXTURES / "bundles" / "realvllm-history-queueing.json.gz").prometheus
    config = FIXTURES / "model-configs" / "qwen2.5-0.5b" / "config.json"
    bundle.model_config = ModelConfigEvidence(source=str(config), text=config.read_text())
    return bundle


def counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(module, name)

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_each_source_and_the_probe_statistics_are_computed_once(monkeypatch):
    # counted where the parsers call them, whichever view asked
    scrapes = counting(monkeypatch, doctor.engine_metrics.window, "assemble")
    history = counting(monkeypatch, doctor.engine_metrics.history, "assemble")
    paths = counting(monkeypatch, doctor.derive.stream_stats, "path_stats")
    logs = counting(monkeypatch, doctor.derive.log_facts, "parse_engine_log")
    views = views_of(Evidence(both_sources()))
    assert views["metrics_window"]["source"] == "scrape" and "missing" not in views["sizing"]
    assert {w["source"] for w in views["user_felt"]["witnesses"]} == {"probe", "scrape", "prometheus"}
    assert (len(scrapes), len(history), len(logs)) == (1, 1, 1)
    assert len(paths) == len(views["stream_stats"]["paths"]) >= 1


def test_the_chosen_window_is_a_copy_with_its_sources_errors():
    """``metrics_window`` adds the source's errors to a copy: the source's own view stays as parsed."""
    bundle = both_sources()
    bundle.metrics = None  # history is then the window
    evidence = Evidence(bundle)
    chosen, source = evidence.get("metrics_window"), evidence.get("history_window")
    assert chosen is not source and chosen.source == source.source == "prometheus"
    assert chosen.ttft == source.ttft


def test_an_input_that_is_missing_reaches_the_derivation_with_its_reason():
    evidence = Evidence(Bundle())
    with pytest.raises(Missing, match="--metrics-url or --prometheus"):
        evidence.get("metrics_window")
    with pytest.raises(Missing, match="no witness of what users felt"):
        evidence.get("user_felt")
    assert evidence.missing_reason("scrape_window") == "no /metrics scrape (pass --metrics-url)"
