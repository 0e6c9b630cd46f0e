"""The ``sizing`` view: the served model (``--model-dir``) sized under the log's setup, as JSON.

What the HTML report's capacity section shows: parameters, weights, KV bytes per token and,
when the log states a budget, the KV cache that budget gives next to the one the engine logged.
"""

from __future__ import annotations

from doctor.derive.missing import Missing
from doctor.evidence import Bundle
from doctor.logscan.parsed import LogFacts
from doctor.sizing.against_log import sizing_from_log
from doctor.sizing.architecture import ConfigError, parse_architecture
from doctor.sizing.model_fit import Setup, size_model
from doctor.sizing.sizing_json import SizingSummary, summary


def derive_sizing(bundle: Bundle, log_facts: LogFacts | Missing) -> SizingSummary:
    if bundle.model_config is None:
        raise Missing("no model config (pass --model-dir DIR)")
    try:
        arch = parse_architecture(bundle.model_config.text, bundle.model_config.source)
    except ConfigError as exc:
        raise Missing(str(exc)) from None
    if isinstance(log_facts, Missing):
        return summary(size_model(arch, Setup()))
    return summary(*sizing_from_log(arch, log_facts))
