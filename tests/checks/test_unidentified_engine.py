"""Checks whose lever is no engine flag (LD210's heap freeze, LD211's front-end processes) word an
unidentified engine as ``engine_flag`` does: the limit and every known engine's spelling, never
"not exposed by an unidentified engine" (nothing says it lacks the lever) nor one engine's flag."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from checks.engine_wide_pauses import engine_wide_pauses
from checks.front_end_saturated import front_end_saturated
from doctor.bundle import from_dict
from doctor.checking.contract import Fire
from doctor.checklib import engine_flag
from doctor.derive import Evidence
from doctor.derive.log_facts import LogFacts
from doctor.engines.names import UNKNOWN

CHECKS = Path(__file__).resolve().parents[2] / "fixtures" / "checks"


def unidentified(case: str) -> tuple[Evidence, dict[str, Any]]:
    """A fixture's evidence, and the arguments that make its engine unidentified: its log names no
    engine, its window none."""
    ev = Evidence(from_dict(json.loads((CHECKS / case).read_text())["bundle"], case))
    window = ev.get("metrics_window")
    return ev, {"metrics": ev.get("metrics"), "metrics_window": dataclasses.replace(window, engine_kind=None),
                "log_facts": LogFacts(source="engine.log", engine=UNKNOWN)}


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
