"""Which engine served: the ``engine`` view, the one identification every check names it by.

A remediation names the serving engine's own flag (``checklib.engine_flag``) and its prose names
the engine, so every finding of a run must name the same one, and none may hand one product's knob
to another. Each check used to ask with what it happened to declare (a check without the startup
log took an SGLang server for vLLM); this view asks once, with everything that can tell, strongest
first: the startup log's markers, the /metrics names, the engine's own description (llama.cpp's
``/props``, SGLang's ``/get_server_info``, TGI's ``/info``, the ``owned_by`` of ``/v1/models``), its
``Server`` header. A log that names no engine llm-doctor knows yields to the others. When nothing
tells, the engine is ``UNKNOWN``: unidentified, and a remediation gives each known engine's
spelling of the limit rather than assume vLLM's.
"""

from __future__ import annotations

from dataclasses import dataclass

from doctor.derive.missing import Missing
from doctor.engine_metrics.views import MetricsWindow
from doctor.engines.names import UNKNOWN, engine_of_answers
from doctor.evidence import Bundle, EndpointsEvidence
from doctor.logscan.parsed import LogFacts


@dataclass(frozen=True)
class EngineIdentity:
    """The engine that served, as ``doctor.engines.names`` names it (``UNKNOWN`` when nothing told),
    and the evidence that told (``by``: "its startup log", "its /metrics names", "GET /props", "its
    Server header", "the owned_by of its /v1/models"; what was looked at when nothing did)."""

    id: str
    by: str


#: What a check is given when nobody identified the engine: a direct call that passes none.
UNIDENTIFIED = EngineIdentity(UNKNOWN, "nothing tells")


def identify_engine(log_facts: LogFacts | None, metrics_window: MetricsWindow | None = None,
                    endpoints: EndpointsEvidence | None = None) -> EngineIdentity:
    """The rule of the ``engine`` view, for whoever holds the evidence itself (``checklib.engine_of``)."""
    if log_facts is not None and log_facts.engine != UNKNOWN:
        return EngineIdentity(log_facts.engine, "its startup log")
    if metrics_window is not None and metrics_window.engine_kind is not None:
        named = "its series' names in Prometheus" if metrics_window.source == "prometheus" else "its /metrics names"
        return EngineIdentity(metrics_window.engine_kind, named)
    for ep in endpoints.endpoints if endpoints is not None else ():
        if ep.role != "engine":
            continue
        if ep.engine_info is not None:
            return EngineIdentity(ep.engine_info.engine, f"GET {ep.engine_info.path}")
        if (answered := engine_of_answers(ep.headers, (m.owned_by for m in ep.models))) is not None:
            return EngineIdentity(*answered)
    looked = [name for name, seen in (("a startup log that names no known engine", log_facts),
                                      ("metrics", metrics_window), ("the engine's endpoints", endpoints)) if seen]
    return EngineIdentity(UNKNOWN, f"nothing tells ({', '.join(looked) or 'no engine evidence'})")


def derive_engine(bundle: Bundle, log_facts: LogFacts | Missing, metrics_window: MetricsWindow | Missing) -> EngineIdentity:
    """The ``engine`` view: never missing, ``UNKNOWN`` when nothing in the bundle tells."""
    return identify_engine(None if isinstance(log_facts, Missing) else log_facts,
                           None if isinstance(metrics_window, Missing) else metrics_window, bundle.endpoints)
