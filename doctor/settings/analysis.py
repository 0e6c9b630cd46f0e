"""What a run analyses and where its results go: the checks' selection, thresholds, budgets and
``--fail-on``, the report files and stdout, the metrics outputs, the baseline folder and what a
comparison calls a regression; flags over the config file over the defaults, checked before
anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from doctor.checking.registry import Registry, load_registry
from doctor.checking.runner import AnalyzeOptions, validate_settings
from doctor.foundation.errors import UsageError
from doctor.foundation.user_paths import (
    FILE_OUTPUTS,
    PIPEABLE,
    check_output_file,
    check_output_folder,
    distinct_files,
    is_stdout,
    piped_output,
)
from doctor.model import Budgets, FailOn, Practical
from doctor.settings.config_file import FileConfig, parse_set
from doctor.settings.probe_plan import budget
from doctor.settings.values import ANALYSIS, BUDGETS, Flags, bounded, checked_url, split


def build_analyze_options(opts: Flags, cfg: FileConfig, region: str | None) -> AnalyzeOptions:
    """Selection, thresholds, budgets and ``--fail-on`` for ``analyze``: flags over the config file."""
    a = cfg.analysis
    settings = {k: dict(v) for k, v in cfg.checks.items()}
    for check, values in parse_set(opts.get("set") or []).items():
        settings[check] = {**settings.pop(check, {}), **values}  # last: a later key wins (runner.settings_for)
    budgets = Budgets(
        ttft_s=budget(opts, cfg, "ttft", region, BUDGETS.ttft_s),
        tpot_s=budget(opts, cfg, "tpot", region, BUDGETS.tpot_s),
    )
    return AnalyzeOptions(
        select=split(opts.get("select")) or list(a.get("select", [])),
        ignore=split(opts.get("ignore")) or list(a.get("ignore", [])),
        settings=settings,
        budgets=budgets,
        fail_on=check_output_options(opts, cfg),
    )


#: What ``--format`` may print to stdout; the first is the default.
FORMATS = ("text", "json")


def check_output_options(opts: Flags, cfg: FileConfig) -> FailOn:
    """Validate ``--format`` and ``--fail-on``; return the ``--fail-on`` level.

    Called before anything is probed or written, so that a typo does not cost a probe run or
    leave a report file behind next to the error.
    """
    fmt = opts.get("format") or FORMATS[0]
    if fmt not in FORMATS:
        raise UsageError(f"--format must be {' or '.join(FORMATS)}, got {fmt!r}")
    piped_output({key: opts.get(key) for key in PIPEABLE}, fmt)  # at most one document on stdout
    distinct_files({key: opts.get(key) for key in FILE_OUTPUTS})  # and one document per file
    value = opts.get("fail_on") or cfg.analysis.get("fail_on") or ANALYSIS.fail_on.value
    try:
        return FailOn(value)
    except ValueError:
        raise UsageError(f"--fail-on must be felt, info, warning or critical, got {value!r}") from None


def checked_registry(options: AnalyzeOptions) -> Registry:
    """The check catalogue, with ``--select``/``--ignore`` keys and ``--set`` names verified.

    ``diagnose`` calls it before probing: an unknown key would otherwise surface only after
    the probe, and ``--select LD999`` would run no check at all and exit HEALTHY.
    """
    registry = load_registry()
    registry.select(options.select, options.ignore)
    validate_settings(registry, options.settings)
    return registry


@dataclass(frozen=True)
class Outputs:
    """Where a report goes: its files (``--json``, ``--html``, ``--md``; ``-`` is stdout), what
    stdout prints (``--format``) and how much (``--verbose``), and the level that exits 1 (``--fail-on``)."""

    json: Path | None = None
    html: Path | None = None
    md: Path | None = None
    format: str = FORMATS[0]
    verbose: bool = False
    fail_on: FailOn = ANALYSIS.fail_on

    def paths(self) -> dict[str, Path | None]:
        """The report files asked for, by option name (``json``, ``html``, ``md``); None when not asked."""
        return {"json": self.json, "html": self.html, "md": self.md}

    def piped(self) -> str | None:
        """The one output ``-`` sends to stdout, if any (``doctor.foundation.user_paths.piped_output``)."""
        return piped_output(self.paths(), self.format)

    def file(self, key: str) -> Path | None:
        """The file ``--json``/``--html``/``--md`` names; None when not asked or ``-`` (stdout)."""
        path = self.paths()[key]
        return None if path is None or is_stdout(path) else path

    def footer_pointer(self) -> str | None:
        """The file the Markdown summary's footer points at: the HTML, else the JSON written beside it."""
        return next((p.name for p in (self.file("html"), self.file("json")) if p is not None), None)

    def for_target(self, part: str) -> Outputs:
        """The outputs of one named target of a round: ``r.json`` becomes ``r.<part>.json``; ``-``
        stays stdout, where each target's document follows the last (``jq`` reads the stream)."""

        def renamed(path: Path | None) -> Path | None:
            return path if path is None or is_stdout(path) else path.with_suffix(f".{part}{path.suffix}")

        return replace(self, json=renamed(self.json), html=renamed(self.html), md=renamed(self.md))


def build_outputs(opts: Flags, cfg: FileConfig) -> Outputs:
    """``--json``, ``--html``, ``--md``, ``--format``, ``--verbose`` and ``--fail-on``, checked
    (``check_output_options``); the files are checked for writing by ``check_output_paths``."""
    fail_on = check_output_options(opts, cfg)
    files = {key: None if opts.get(key) is None else Path(opts[key]) for key in ("json", "html", "md")}
    return Outputs(**files, format=opts.get("format") or FORMATS[0], verbose=bool(opts.get("verbose")), fail_on=fail_on)


#: ``Practical``'s fields by the flag (``--min-change``) and ``[compare]`` key (``min_change``) that set them.
PRACTICAL_KEYS = {"relative": "min_change", "ttft_s": "min_ttft_change", "tpot_s": "min_tpot_change"}


def build_practical(opts: Flags, cfg: FileConfig) -> Practical:
    """The smallest shift a comparison calls a regression: each flag, else ``[compare]`` of the
    config file (checked when it was loaded), else ``Practical``'s default."""
    values: dict[str, float] = {}
    for name, key in PRACTICAL_KEYS.items():
        if opts.get(key) is not None:
            values[name] = float(bounded(opts[key], "--" + key.replace("_", "-"), minimum=0, inclusive=True))
        elif cfg.compare.get(key) is not None:
            values[name] = float(cfg.compare[key])
    return Practical(**values)


def check_baseline_folder(opts: Flags) -> Path | None:
    """``--baseline DIR``: a folder (created on the first healthy run), never a file."""
    folder = opts.get("baseline")
    return check_output_folder(Path(folder), "--baseline") if folder is not None else None


@dataclass(frozen=True)
class ExportTargets:
    """Where a run's metrics go (``--metrics-textfile``, ``--pushgateway``); both optional."""

    textfile: Path | None = None
    pushgateway: str | None = None

    @property
    def asked(self) -> bool:
        """Whether any output was asked for (else no registry need be built)."""
        return self.textfile is not None or self.pushgateway is not None


def check_export_options(opts: Flags) -> ExportTargets:
    """Validate the metrics outputs before anything is probed: a typo must not cost a probe run.

    The textfile must be writable and its folder must already exist (node_exporter reads a fixed
    folder; creating a misspelt one would export into nowhere), and the Pushgateway must be an
    http(s) URL.
    """
    textfile = opts.get("metrics_textfile")
    if textfile is not None:
        textfile = Path(textfile)
        check_output_file(textfile, "--metrics-textfile")
    return ExportTargets(textfile=textfile, pushgateway=checked_url(opts.get("pushgateway"), "--pushgateway"))


