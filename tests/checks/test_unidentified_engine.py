"""Checks whose lever is no engine flag (LD210's heap freeze, LD211's front-end processes) word an
unidentified engine as ``engine_flag`` does: the limit and every known engine's spelling, never
"not exposed by an unidentified engine" (nothing says it lacks the lever) nor one engine's flag.
A metric its /metrics lacked is worded the same way (``not_in_metrics``): what was observed, "the
unidentified engine's /metrics has no X", never that the engine does not expose it.

Each case runs a committed fixture's evidence with the check called directly, its ``engine`` view
identified from a log that names no engine and a window whose metric names none."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from checks.engine_wedged import engine_wedged
from checks.engine_wide_pauses import engine_wide_pauses
from checks.front_end_saturated import front_end_saturated
from checks.requests_queued_before_prefill import requests_queued_before_prefill
from doctor.bundle import from_dict
from doctor.checking.contract import Fire, NotApplicable, Pass, Result
from doctor.checklib import engine_flag, not_in_metrics
from doctor.derive import Evidence
from doctor.derive.engine import identify_engine
from doctor.derive.log_facts import LogFacts
from doctor.engines.names import LLAMACPP, UNKNOWN

CHECKS = Path(__file__).resolve().parents[2] / "fixtures" / "checks"


def unidentified(case: str) -> tuple[Evidence, dict[str, Any]]:
    """A fixture's evidence, and the arguments that make its engine unidentified: its log names no
    engine, its window none (``metrics_window`` and ``engine``; ``metrics`` as recorded)."""
    ev = Evidence(from_dict(json.loads((CHECKS / case).read_text())["bundle"], case))
    window = dataclasses.replace(ev.get("metrics_window"), engine_kind=None)
    engine = identify_engine(LogFacts(source="engine.log", engine=UNKNOWN), window)
    assert engine.id == UNKNOWN, engine
    return ev, {"metrics": ev.get("metrics"), "metrics_window": window, "engine": engine}


@pytest.mark.parametrize(("case", "spellings"), [
    ("engine-wide-pauses/fires-every-stream-freezes-at-once.json", ["vLLM:", "SGLang:", "TensorRT-LLM:"]),
    ("front-end-saturated/fires-api-server-pegged.json", ["--api-server-count", "--tokenizer-worker-num"]),
])
def test_an_unidentified_engine_gets_the_neutral_wording(case: str, spellings: list[str]) -> None:
    ev, args = unidentified(case)
    if case.startswith("engine-wide"):
        result = engine_wide_pauses(ev.get("stream"), **args)
    else:
        result = front_end_saturated(stream_stats=ev.get("stream_stats"), stream=ev.get("stream"), **args)
    assert isinstance(result, Fire), result
    said = f"{result.remediation.suggested} | {result.remediation.where}"
    assert "not exposed" not in said and "unidentified engine server" not in said
    neutral = engine_flag(UNKNOWN, "max_num_seqs").split(" (")[0]  # engine_flag's own opening words
    assert result.remediation.where.startswith(neutral.replace("max_num_seqs", ""))
    assert "unidentified engine;" in result.remediation.where
    assert all(s in result.remediation.where for s in spellings)


def said(result: Result) -> str:
    """Every text a result shows: a pass's or not-applicable's message, or a finding's summary and remediation."""
    if isinstance(result, (NotApplicable, Pass)):
        return result.message
    assert isinstance(result, Fire), result
    rem = result.remediation
    return " | ".join((result.title, result.summary, rem.suggested, rem.why, rem.verify, rem.where or ""))


def run(check: Any, **args: Any) -> Result:
    """The check's result, a raised ``NotApplicable`` as the runner records it."""
    try:
        result: Result = check(**args)
    except NotApplicable as raised:
        return raised
    return result


@pytest.mark.parametrize(("case", "observed", "outcome"), [
    ("front-end-saturated/na-no-process-cpu.json", "process_cpu_seconds_total for its serving process", NotApplicable),
    ("engine-wedged/na-not-exposed-by-llamacpp.json", "token or request counter", NotApplicable),
    ("requests-queued-before-prefill/na-llama-cpp-nothing-waited.json", "queue-time histogram", NotApplicable),
    # requests waited, but without the llama.cpp log no slot count says the batch was full
    ("requests-queued-before-prefill/fires-llama-cpp-slots-full-no-queue-histogram.json", "queue-time histogram", Pass),
    ("engine-wide-pauses/fires-no-gc-counter.json", "python_gc_collections_total", Fire),
])
def test_a_metric_an_unidentified_engine_lacked_is_said_as_observed(case: str, observed: str, outcome: type) -> None:
    ev, args = unidentified(case)
    check = case.split("/")[0]
    if check == "front-end-saturated":
        result = run(front_end_saturated, stream_stats=ev.get("stream_stats"), stream=ev.get("stream"), **args)
    elif check == "engine-wedged":
        result = run(engine_wedged, stream=ev.get("stream"), metrics=args["metrics"], engine=args["engine"])
    elif check == "requests-queued-before-prefill":
        result = run(requests_queued_before_prefill, stream_stats=ev.get("stream_stats"), stream=ev.get("stream"),
                     metrics_window=args["metrics_window"], engine=args["engine"],
                     log_facts=LogFacts(source="engine.log", engine=UNKNOWN))
    else:
        result = run(engine_wide_pauses, stream=ev.get("stream"), **args)
    assert isinstance(result, outcome), result
    text = said(result)
    assert f"the unidentified engine's /metrics has no {observed}" in text
    assert "not exposed by an unidentified engine" not in text and "not exposed" not in text
    assert "vllm serve" not in text  # nor one engine's flag as if it were this one's


def test_an_identified_engine_still_does_not_expose_it() -> None:
    """The issue's wording where a known engine never shows the evidence; vLLM for an engine no evidence named."""
    said = not_in_metrics(LLAMACPP, "queue-time histogram")
    assert said == "not exposed by llama.cpp: its /metrics has no queue-time histogram"
    assert not_in_metrics(None, "x").startswith("not exposed by vLLM")
    assert not_in_metrics(UNKNOWN, "x") == "the unidentified engine's /metrics has no x"
