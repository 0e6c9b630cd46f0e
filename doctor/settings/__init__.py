"""A run's settings: flags over the config file over the dataclass defaults, resolved once.

``resolve(command, flags, file)`` (``doctor.settings.run``) is where every command starts: one
frozen ``RunSettings`` per run, built in one order for every command, with the named steps that
derive a copy of it (``lookup_targets``, ``for_saved``, ``with_lab``). The flags are read by name
in this package only (``tests/cli/test_settings.py`` holds that). Its modules:

- ``config_file``: the TOML config file (``llm-doctor.toml`` or ``--config``), read and type-checked;
- ``values``: the defaults the help text quotes, and the checks one value passes;
- ``probe_plan``: the collector's plan (``CollectConfig``), its targets and a fleet;
- ``load_plan``: the scenario of ``load`` and the levels of ``sweep``;
- ``analysis``: the checks, budgets, outputs, metrics exports, baseline and comparison thresholds;
- ``watch_plan``: how ``watch`` repeats;
- ``run``: ``RunSettings`` and ``resolve``.
"""

from doctor.settings.analysis import FORMATS, ExportTargets, Outputs, build_analyze_options
from doctor.settings.load_plan import SweepPlan, level_config
from doctor.settings.probe_plan import build_collect_config
from doctor.settings.run import RunSettings, for_saved, lookup_targets, resolve, with_lab
from doctor.settings.values import (
    ANALYSIS,
    API_KEY_ENV,
    BUDGETS,
    PLAN,
    PRACTICAL,
    REFUSED_BUDGET_S,
    Flags,
    shown,
    shown_duration,
)
from doctor.settings.watch_plan import WatchPlan

__all__ = [
    "ANALYSIS",
    "API_KEY_ENV",
    "BUDGETS",
    "FORMATS",
    "PLAN",
    "PRACTICAL",
    "REFUSED_BUDGET_S",
    "ExportTargets",
    "Flags",
    "Outputs",
    "RunSettings",
    "SweepPlan",
    "WatchPlan",
    "build_analyze_options",
    "build_collect_config",
    "for_saved",
    "level_config",
    "lookup_targets",
    "resolve",
    "shown",
    "shown_duration",
    "with_lab",
]
