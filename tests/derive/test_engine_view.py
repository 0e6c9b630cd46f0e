"""The ``engine`` view: one identification of the serving engine, from everything that can tell.

Every check that names the engine or its flag reads it, so a check that did not declare the log
still names SGLang's flag on an SGLang server (before the view, LD202 took a server whose /metrics
said SGLang for vLLM when no log was given), and a run where nothing tells names no engine's flag
as if it were this one's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from checks.prefill_interference import prefill_interference
from doctor.bundle import from_dict, load_path
from doctor.checking.contract import Fire
from doctor.checking.registry import load_registry
from doctor.checking.runner import run_check
from doctor.derive import Evidence
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity, identify_engine
from doctor.derive.log_facts import LogFacts
from doctor.engines.names import LLAMACPP, SGLANG, UNKNOWN, VLLM
from doctor.evidence import Endpoint, EndpointsEvidence, MetricsEvidence, ModelInfo
from doctor.foundation.serial import to_jsonable
from tests.support.bundles import bundle, log
from tests.support.make_check_fixtures_general import scrapes

ROOT = Path(__file__).resolve().parents[2]
SGLANG_SCRAPE = (ROOT / "fixtures/engines/sglang/2025-03-pr4444-llama3-8b-idle-part.prom").read_text()
VLLM_STARTUP = "INFO 10-14 09:31:02 [api_server.py:1351] vLLM API server version 0.11.0"


def engine(**kinds: object) -> EngineIdentity:
    identity: EngineIdentity = Evidence(bundle(**kinds)).get("engine")
    return identity


def scraped(text: str) -> MetricsEvidence:
    return scrapes(("before", -0.1, text), ("after", 5.0, text))


def test_a_scrape_names_the_engine_without_a_log() -> None:
    assert engine(metrics=scraped(SGLANG_SCRAPE)) == EngineIdentity(SGLANG, "its /metrics names")


def test_the_log_comes_first_and_an_unknown_log_yields() -> None:
    assert engine(log=log([VLLM_STARTUP]), metrics=scraped(SGLANG_SCRAPE)).id == VLLM
    window = Evidence(bundle(metrics=scraped(SGLANG_SCRAPE))).get("metrics_window")
    unknown_log = LogFacts(source="engine.log", engine=UNKNOWN)
    assert identify_engine(unknown_log, window) == EngineIdentity(SGLANG, "its /metrics names")
    assert identify_engine(unknown_log).by == "nothing tells (a startup log that names no known engine)"


def test_the_engine_endpoint_tells_when_log_and_scrape_do_not() -> None:
    owned = EndpointsEvidence([Endpoint(role="engine", url="http://e", models=[ModelInfo(id="m", owned_by="vllm")])])
    assert engine(endpoints=owned) == EngineIdentity(VLLM, "the owned_by of its /v1/models")
    header = EndpointsEvidence([Endpoint(role="gateway", url="http://gw", headers={"server": "llama.cpp"}),
                                Endpoint(role="engine", url="http://e", headers={"server": "llama.cpp"})])
    assert engine(endpoints=header) == EngineIdentity(LLAMACPP, "its Server header")
    gateway_only = EndpointsEvidence([Endpoint(role="gateway", url="http://gw", headers={"server": "llama.cpp"})])
    assert engine(endpoints=gateway_only).id == UNKNOWN  # a gateway's header is not the engine's


def test_nothing_tells_is_unidentified_never_vllm() -> None:
    nothing = engine()
    assert nothing.id == UNKNOWN and nothing.by.startswith("nothing tells")
    assert UNIDENTIFIED.id == UNKNOWN


def test_a_check_without_the_log_names_the_flag_of_the_engine_the_scrape_names() -> None:
    """LD202 on its fixture's evidence: the flag follows the view, SGLang's for SGLang, and neutral
    when nothing tells (it named vLLM's in both cases before)."""
    case = ROOT / "fixtures/checks/prefill-interference/fires-server-histograms-only.json"
    ev = Evidence(from_dict(json.loads(case.read_text())["bundle"], str(case)))
    args = {"stream_stats": ev.maybe("stream_stats"), "stream": ev.maybe("stream"), "metrics": ev.maybe("metrics"),
            "metrics_window": ev.maybe("metrics_window")}
    on_sglang = prefill_interference(**args, engine=EngineIdentity(SGLANG, "its /metrics names"))
    unidentified = prefill_interference(**args)
    assert isinstance(on_sglang, Fire) and isinstance(unidentified, Fire)
    assert (on_sglang.remediation.where or "").startswith("SGLang flag"), on_sglang.remediation.where
    assert "unidentified engine;" in (unidentified.remediation.where or "")
    assert not (unidentified.remediation.where or "").startswith("vllm serve")


def test_prometheus_history_names_the_engine_by_its_series() -> None:
    """A history-only run (no log, no scrape) of a real vLLM: its series are vLLM's, so is the engine."""
    history = Evidence(load_path(ROOT / "fixtures/bundles/realvllm-history-queueing.json.gz"))
    assert history.maybe("log_facts") is None and history.get("metrics_window").source == "prometheus"
    assert history.get("engine") == EngineIdentity(VLLM, "its series' names in Prometheus")


CHECK_CASES = sorted((ROOT / "fixtures/checks").glob("*/*.json"))


@pytest.mark.parametrize("case", CHECK_CASES, ids=[f"{c.parent.name}/{c.stem}" for c in CHECK_CASES])
def test_every_check_words_an_unidentified_engine_as_a_sentence(case: Path) -> None:
    """Each check fixture with its engine unidentified: the display name carries its own article
    ("the unidentified engine"), so no text says "the the", and a part of it reads
    "the unidentified engine's server" (``engine_part``)."""
    data = json.loads(case.read_text())
    spec = load_registry(plugins=False).find(case.parent.name)
    assert spec is not None
    evidence = Evidence(from_dict(data["bundle"], str(case)))
    evidence._cache["engine"] = UNIDENTIFIED  # as a run where nothing tells
    text = json.dumps(to_jsonable(run_check(spec, evidence, data.get("settings", {}))))
    assert not re.search(r"\b(the|an?) the\b", text, re.IGNORECASE), text
