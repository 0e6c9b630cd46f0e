"""Configuration lookups shared by the capacity / configuration checks (LD4xx).

Not a check (the registry skips ``_`` modules). ``checks._engine.engine_setting`` reads the log
and the run record; what is here adds the one other source those checks accept (/v1/models)
and the reading of boolean flags as vLLM prints them.
"""

from __future__ import annotations

from typing import Any

from checks._engine import Setting, engine_setting
from doctor.derive.log_facts import LogFacts
from doctor.evidence import EndpointsEvidence, RunRecord

_OFF = ("false", "0", "off", "no", "none", "disabled")


def model_len(
    log_facts: LogFacts | None, run: RunRecord | None, endpoints: EndpointsEvidence | None
) -> Setting | None:
    """``max_model_len`` from the log / run record, else what /v1/models reports."""
    found = engine_setting("max_model_len", log_facts, run)
    if found is not None or endpoints is None:
        return found
    for ep in endpoints.endpoints:
        for model in ep.models:
            if model.max_model_len:
                return Setting(model.max_model_len, f"{ep.role} /v1/models")
    return None


def is_off(value: Any) -> bool:
    """A flag value that means off, whether the log printed a bool, a number or a word."""
    return value is False or str(value).strip().lower() in _OFF
