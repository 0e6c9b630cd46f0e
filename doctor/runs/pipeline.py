"""The diagnosis pipeline: collect -> save -> load -> analyze, with no rendering and no flags.

Every live diagnosis goes through a saved bundle, so the offline path (``analyze``) is exercised
by every run, and a kept ``--bundle`` re-analyses to the same verdict (it records the analysis
settings). The CLI's ``diagnose`` and ``demo`` call this; so will ``watch`` and ``sweep``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from doctor.bundle import load_path, save
from doctor.checking.registry import Registry
from doctor.checking.runner import AnalyzeOptions, analyze, with_analysis
from doctor.collection.collector import Progress, collect
from doctor.model import Report
from doctor.probes.plan import CollectConfig


def diagnose(
    config: CollectConfig,
    options: AnalyzeOptions,
    registry: Registry,
    *,
    bundle_path: Path | None = None,
    progress: Progress = lambda _msg: None,
) -> Report:
    """Collect per ``config``, write the bundle (to ``bundle_path`` when given, else a temporary
    file), read it back and analyse it with ``options``; the report of that re-read bundle."""
    bundle = with_analysis(collect(config, progress), options, registry)  # a kept bundle re-analyses alike
    with tempfile.TemporaryDirectory() as tmp:
        path = bundle_path or Path(tmp) / "bundle.json"
        save(bundle, path)
        return analyze(load_path(path), options, registry)
