"""Configuration: the TOML file (``llm-doctor.toml`` or ``--config``) merged under the flags.

The file can hold targets, probe shape, budgets (also per region), check thresholds and
run-record fields::

    [targets]
    engine = "http://10.0.0.5:8000"
    gateway = "https://llm.example.com"
    log = "/var/log/vllm.log"

    gateway_kind = "fastapi"  # names the edge in remediations when its headers do not

    [probe]
    route = "chat"
    concurrency = 4
    client_workers = 4                            # processes that read the streams (--client-workers)
    gateway_route = "POST /chat?prompt={prompt}"  # the application's own route on the gateway
    gateway_payload = "edge-body.json"            # its body template ({prompt}, {max_tokens})
    framing = "raw"                               # force a stream framing (default: detected)
    text_field = "message.content"                # where NDJSON objects keep their text

    [budgets]
    ttft = 0.5          # seconds
    tpot = 0.05
    [budgets.regions.eu-west-1]
    ttft = 0.8

    [run]
    provider = "aws"
    region = "eu-west-1"

    [checks.LD101]      # or the check's name
    queue_share = 0.6

    [analysis]
    fail_on = "warning"
    ignore = ["LD5"]

    [compare]           # what counts as a regression (compare, --baseline, a canary)
    min_change = 0.1    # of the base run's median
    min_ttft_change = 0.01  # seconds, TTFT and E2E
    min_tpot_change = 0.001 # seconds, TPOT and ITL

API keys never live in this file: only the name of the environment variable or a key file.

Every section is type-checked against ``SCHEMA`` when loaded: a wrong type or a misspelled key
is a ``UsageError`` naming the file, section and key, never a traceback later or a setting
silently ignored. ``[run]`` takes free-form string labels besides its own fields, and each
``[checks.<CODE or name>]`` table takes scalars (typed against the check's options later).
"""

from __future__ import annotations

import math
import reprlib
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from doctor.evidence.run import AnalysisRecord
from doctor.foundation.console import note
from doctor.foundation.errors import BundleError, UsageError
from doctor.foundation.wire import number

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_CONFIG = "llm-doctor.toml"


@dataclass
class FileConfig:
    """The config file's sections as loaded and type-checked against ``SCHEMA``, empty where the file
    says nothing; the flags are merged over it later, so it holds only what the file said.
    """

    targets: dict[str, Any] = field(default_factory=dict)
    probe: dict[str, Any] = field(default_factory=dict)
    budgets: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    compare: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def budget(self, name: str, region: str | None) -> float | None:
        """A budget (``ttft`` / ``tpot``, seconds), the region's value first."""
        regional = self.budgets.get("regions", {}).get(region or "", {})
        value = regional.get(name, self.budgets.get(name))
        return float(value) if value is not None else None


#: The sections that decide an analysis (as opposed to what to probe and how).
ANALYSIS_SECTIONS = ("budgets", "checks", "analysis")


def with_recorded_analysis(cfg: FileConfig, record: AnalysisRecord | None, *, explicit: bool) -> FileConfig:
    """The config to re-analyse a bundle with: its recorded analysis, under ``cfg`` when the user
    named that file (``--config``), in place of the analysis sections of an implicit one.

    A report must re-analyse to its own verdict wherever it is opened, so an
    ``llm-doctor.toml`` that merely sits in the working directory does not change it; a file
    the user names on purpose does, key by key (its region budgets included), and flags win
    over both later, as everywhere. The recorded ``fail_on`` is not taken: what fails the exit
    code is the caller's choice (``--fail-on``, an explicit config), else today's default.
    """
    if record is None:
        return cfg
    recorded = _recorded_sections(record)
    cleared: dict[str, Any] = {key: {} for key in ANALYSIS_SECTIONS}
    top = cfg if explicit else replace(cfg, **cleared)
    checks = {key: dict(values) for key, values in recorded["checks"].items()}
    for key, values in top.checks.items():  # re-inserted last: a later key wins (runner.settings_for)
        checks[key] = {**checks.pop(key, {}), **values}
    return replace(
        top,
        budgets={**recorded["budgets"], **top.budgets},
        checks=checks,
        analysis={**recorded["analysis"], **top.analysis},
    )


def _recorded_sections(record: AnalysisRecord) -> dict[str, dict[str, Any]]:
    """The record as config sections, checked: a hand-edited bundle fails here, by field."""
    budgets: dict[str, float] = {}
    for name, value in (("ttft", record.ttft_budget_s), ("tpot", record.tpot_budget_s)):
        if value is None:
            continue
        if not math.isfinite(value) or value <= 0:
            raise BundleError(f"the bundle's recorded analysis: {name}_budget_s must be a number > 0, got {value!r}")
        budgets[name] = value
    # not the recorded fail_on: the exit gate is the caller's, not the evidence's (it changes no verdict), and
    # bundles made before felt became the default recorded warning without anyone choosing it
    analysis: dict[str, Any] = {"select": list(record.select), "ignore": list(record.ignore)}
    return {"budgets": budgets, "checks": record.settings, "analysis": analysis}


@dataclass(frozen=True)
class _Value:
    """A leaf of the schema: what the message says it must be, and the test."""

    name: str
    accepts: Callable[[Any], bool]


@dataclass(frozen=True)
class _Table:
    """A TOML table: the fixed ``keys``, or (when ``each`` is set) any key holding ``each``."""

    keys: dict[str, _Value | _Table] = field(default_factory=dict)
    each: _Value | _Table | None = None


def _number(v: Any) -> bool:
    """A finite number within ``doctor.foundation.wire.number``'s bound (``1`` then 400 zeros is none: no
    float holds it); TOML booleans are ints to Python, and are not numbers here."""
    return isinstance(v, (int, float)) and number(v) is not None


def _nonnegative(v: Any) -> bool:
    return _number(v) and v >= 0  # ``_number`` already holds it finite and within a float's range


STRING = _Value("a string", lambda v: isinstance(v, str))
INTEGER = _Value("an integer", lambda v: isinstance(v, int) and number(v, int) is not None)
NUMBER = _Value("a number", _number)
STRINGS = _Value("an array of strings", lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v))
SCALAR = _Value("a string, number or boolean", lambda v: isinstance(v, (str, bool)) or _number(v))
NONNEGATIVE = _Value("a finite number >= 0", _nonnegative)
DURATION = _Value("a duration (e.g. \"15m\") or a number of seconds", lambda v: isinstance(v, str) or _number(v))
_BUDGETS: dict[str, _Value | _Table] = {"ttft": NUMBER, "tpot": NUMBER}

SCHEMA = _Table({
    "targets": _Table({
        "engine": STRING, "gateway": STRING, "router": STRING, "router_metrics": STRING, "router_args": STRING, "router_log": STRING, "log": STRING, "model_dir": STRING, "metrics_url": STRING,
        "prometheus": STRING, "since": DURATION, "selector": STRING, "gateway_kind": STRING,
        "otlp_listen": STRING,
        "traces": STRING,
    }),
    "probe": _Table({
        "route": STRING, "payload": STRING, "model": STRING, "prompt_tokens": INTEGER,
        "max_tokens": INTEGER, "concurrency": INTEGER, "requests": INTEGER, "warmup": INTEGER,
        "duration": NUMBER, "rate": NUMBER, "stall_timeout": NUMBER, "deadline": NUMBER, "scrape_interval": NUMBER,
        "client_workers": INTEGER,
        "api_key_env": STRING, "api_key_file": STRING, "ca_cert": STRING,
        "gateway_route": STRING, "gateway_payload": STRING, "framing": STRING, "text_field": STRING,
    }),
    "budgets": _Table({**_BUDGETS, "regions": _Table(each=_Table(_BUDGETS))}),
    "run": _Table({"provider": STRING, "region": STRING, "client_location": STRING}, each=SCALAR),
    "checks": _Table(each=_Table(each=SCALAR)),
    "analysis": _Table({"select": STRINGS, "ignore": STRINGS, "fail_on": STRING}),
    "compare": _Table({"min_change": NONNEGATIVE, "min_ttft_change": NONNEGATIVE, "min_tpot_change": NONNEGATIVE}),
})
_FORBIDDEN = {"api_key", "api-key", "apikey", "token", "password"}


def _where(parts: list[str]) -> str:
    """``["probe", "concurrency"]`` -> ``[probe] concurrency``; a table's own path -> ``[a.b]``."""
    return f"[{'.'.join(parts[:-1])}] {parts[-1]}" if len(parts) > 1 else f"[{parts[0]}]"


def _shown(value: Any) -> str:
    """A value for a message, bounded in length and in depth: a dotted key a thousand parts deep
    (``a.b.c...``, which TOML reads without recursion) is a table that deep, whose plain ``repr``
    recurses past Python's limit; ``reprlib`` stops at two levels."""
    if isinstance(value, (dict, list)):
        return _CONTAINER.repr(value)
    shown = repr(value)
    return shown if len(shown) <= 60 else f"{shown[:40]}... ({len(shown):,} characters)"


_CONTAINER = reprlib.Repr()
_CONTAINER.maxlevel = 2


def _validate(value: Any, kind: _Value | _Table, parts: list[str], path: Path) -> None:
    """Raise ``UsageError`` at the first value of ``value`` that does not fit ``kind``."""
    if isinstance(kind, _Value):
        if not kind.accepts(value):
            raise UsageError(f"config {path}: {_where(parts)} must be {kind.name}, got {_shown(value)}")
        return
    if not isinstance(value, dict):
        raise UsageError(f"config {path}: {_where(parts)} must be a table, got {_shown(value)}")
    for key, item in value.items():
        sub = kind.keys.get(key, kind.each)
        if sub is None:
            known = ", ".join(sorted(kind.keys))
            if not parts:
                raise UsageError(f"config {path}: unknown section [{key}]; known: {known}")
            raise UsageError(f"config {path}: unknown key {key!r} in [{'.'.join(parts)}]; known: {known}")
        _validate(item, sub, [*parts, key], path)


def load_config(path: Path | None) -> FileConfig:
    """Load ``path``, or ``llm-doctor.toml`` in the working directory when it exists.

    The whole file is checked against ``SCHEMA`` here, so that every later reader can trust
    the types and a typo fails at once with the file, section and key in the message.
    """
    if path is None:
        default = Path(DEFAULT_CONFIG)
        if not default.is_file():
            return FileConfig()
        path = default
        # read by every command without being named: a stray file from another project must not
        # change budgets or targets silently
        note(f"using {DEFAULT_CONFIG} from the working directory ({Path.cwd()}); --config names another")
    try:
        data = tomllib.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"config {path} is not UTF-8 text (byte {exc.start})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config {path} is not valid TOML: {exc}") from None
    except RecursionError:
        raise UsageError(f"config {path} is nested too deeply to be an llm-doctor config") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit
        raise UsageError(f"config {path}: a number is too large ({str(exc).split(';')[0]})") from None
    for section in ("targets", "probe", "run"):  # before the schema: say *why*, not "unknown key"
        table = data.get(section)
        bad = _FORBIDDEN & {k.lower() for k in table} if isinstance(table, dict) else set()
        if bad:
            raise UsageError(
                f"config {path}: secrets do not belong in the config file ({', '.join(sorted(bad))}); "
                "use api_key_env or api_key_file"
            )
    _validate(data, SCHEMA, [], path)
    return FileConfig(**{k: data.get(k, {}) for k in SCHEMA.keys}, path=str(path))


def parse_set(values: list[str]) -> dict[str, dict[str, Any]]:
    """``--set LD101.queue_share=0.6`` -> ``{"LD101": {"queue_share": "0.6"}}`` (typed later)."""
    out: dict[str, dict[str, Any]] = {}
    for item in values:
        key, sep, value = item.partition("=")
        check, dot, option = key.partition(".")
        if not sep or not dot or not check or not option:
            raise UsageError(f"--set expects CHECK.OPTION=VALUE, got {item!r}")
        out.setdefault(check.strip(), {})[option.strip()] = value.strip()
    return out
