"""Settings: flags over the config file over the dataclass defaults, each value checked.

Every default lives on a dataclass, once: the probe plan's on ``CollectConfig``
(``doctor.probes.plan``; its route and load shape are ``ProbeShape``'s, which an older bundle
loads with), the budgets on ``Budgets`` and ``--fail-on`` on ``AnalyzeOptions``. Resolution
reads them from ``PLAN``, ``BUDGETS``, ``ANALYSIS`` and ``PRACTICAL`` (what a comparison calls a
regression, ``doctor.compare.Practical``), and the CLI's help text quotes them with
``shown``, so a default changed there changes the behaviour and the help together.

Values are checked while they are resolved, before anything is sent: a bad URL, a zero
``--rate`` or a typo in ``--fail-on`` is a ``UsageError`` naming the flag or config key.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from doctor import wire
from doctor.compare import Practical
from doctor.config import FileConfig, parse_set
from doctor.console import warn
from doctor.errors import UsageError
from doctor.evidence.stream import FRAMINGS
from doctor.model import Budgets, FailOn
from doctor.probes import kubernetes, logfile
from doctor.probes.gateway_route import edge_settings, impossible_without_engine
from doctor.probes.http import HttpOptions, credential_header
from doctor.probes.lengths import MAX_TOKENS
from doctor.probes.payload import ROUTES
from doctor.probes.plan import MAX_RATE, MAX_REQUESTS, MAX_SECONDS, MAX_STREAMS, CollectConfig
from doctor.redact import Redactor
from doctor.registry import Registry, load_registry
from doctor.runner import AnalyzeOptions, validate_settings
from doctor.sizing.architecture import ConfigError, load_config_text
from doctor.user_paths import check_output_file, check_output_folder, is_stdout, piped_output

#: The defaults every flag falls back to, read from the dataclasses that use them.
PLAN = CollectConfig()
BUDGETS = Budgets()
ANALYSIS = AnalyzeOptions()
PRACTICAL = Practical()

#: The environment variable the API key is read from unless ``--api-key-env`` names another.
API_KEY_ENV = "OPENAI_API_KEY"


def shown(value: Any) -> str:
    """A default as help text quotes it: ``30.0`` -> ``30``, ``0.05`` -> ``0.05``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def shown_duration(seconds: float) -> str:
    """A window as ``--since`` takes it: ``900.0`` -> ``15m``, ``7200.0`` -> ``2h``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}"


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


#: The longest ``--since``: a quarter of history is more than Prometheus keeps by default (15 days);
#: a longer window only makes a query no server answers in time (or a start before the epoch).
MAX_SINCE_S = 90 * 86400.0
#: The longest ``--every``: a round less often than daily is a job for cron, not a watcher that
#: holds a port and a process for it; beyond it, ``1e300`` overflowed the wait.
MAX_EVERY_S = 86400.0


def _since(value: Any) -> float:
    """``--since`` (or ``since`` of the config file) in seconds; the plan's default when unset."""
    return PLAN.since_s if not value else _seconds(str(value), "--since", MAX_SINCE_S)


def _seconds(text: str, flag: str, maximum: float) -> float:
    """``15m`` / ``2h`` / ``900`` -> seconds; a window or period must be finite, positive and at
    most ``maximum``."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > maximum:
        raise UsageError(f"{flag} expects a positive duration of at most {shown_duration(maximum)} like 15m, 2h or 900, "
                         f"got {text!r}")
    return value


def bounded(value: Any, where: str, *, minimum: float, inclusive: bool = False, maximum: float | None = None) -> Any:
    """``value`` when finite, above ``minimum`` (or equal to it, when ``inclusive``) and, when
    given, at most ``maximum``.

    Without this, ``--ttft-budget -1`` yields a "healthy within -1.00 s" verdict, ``--rate 0``
    or ``--deadline inf`` a probe that never ends, and ``--requests 99999999999`` a run that
    eats the machine; ``where`` names the flag or config key.
    """
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float is not a sane count either
        finite = False
    if not finite or value < minimum or (value == minimum and not inclusive) or (maximum is not None and value > maximum):
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        if maximum is not None:
            bound += f" and <= {maximum:g}"
        raise UsageError(f"{where} must be a finite number {bound}, got {value!r}")
    return value


def _probe_number(opts: dict[str, Any], cfg: FileConfig, key: str, default: Any, *, minimum: float, inclusive: bool = False,
                  maximum: float | None = None) -> Any:
    """A numeric probe setting: the flag, else ``[probe]`` of the config file, else ``default``.

    ``is not None`` rather than ``or``, so that an explicit 0 is checked, not replaced.
    """
    if opts.get(key) is not None:
        return bounded(opts[key], "--" + key.replace("_", "-"), minimum=minimum, inclusive=inclusive, maximum=maximum)
    if cfg.probe.get(key) is not None:
        return bounded(cfg.probe[key], f"[probe] {key} in {cfg.path}", minimum=minimum, inclusive=inclusive, maximum=maximum)
    return default


def _url(value: str | None, flag: str) -> str | None:
    """``value`` if httpx can send to it: http(s), a host, a port in 1-65535.

    Checked while parsing flags so that ``http://[::1`` or port 99999 is a usage error naming
    the flag, not a traceback or an obscure probe failure. Credentials in it stay redacted.
    """
    if value is None:
        return None
    shown = Redactor().text(value)
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise UsageError(f"{flag} {shown!r} is not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise UsageError(f"{flag} expects an http:// or https:// URL with a host, got {shown!r}")
    if url.port is not None and not 1 <= url.port <= 65535:
        raise UsageError(f"{flag} {shown!r}: the port must be between 1 and 65535")
    return value


def _same_place(a: str, b: str) -> bool:
    """Whether two checked URLs reach the same server path: scheme, host (any case), port (the
    scheme's default when left out) and path without its trailing slash."""
    defaults = {"http": 80, "https": 443}

    def key(url: httpx.URL) -> tuple[str, str, int | None, str]:
        return url.scheme, url.host.lower(), url.port or defaults.get(url.scheme), url.path.rstrip("/")

    return key(httpx.URL(a)) == key(httpx.URL(b))


def _api_key(env: str, path: str | Path | None) -> str | None:
    """The key in the file ``path`` when given, else in the environment variable ``env``."""
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise UsageError(f"cannot read --api-key-file {path}: {exc.strerror}") from None
    return os.environ.get(env) or None


ENV_VALUE = "@env:"


def _headers(values: list[str] | None) -> dict[str, str]:
    """``--header 'Name: value'``; ``'Name: @env:VAR'`` takes the value from the environment.

    A credential typed on the command line is visible to every user in ``ps`` and stays in shell
    history; the output is redacted either way, but only ``@env:`` keeps it off the command line,
    so a literal credential gets a warning that says how.
    """
    out: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise UsageError("--header expects 'Name: value', got a value without a name")
        if value.startswith(ENV_VALUE):
            var = value[len(ENV_VALUE):]
            if not os.environ.get(var):
                raise UsageError(f"--header {name}: the environment variable {var!r} is not set or empty")
            value = os.environ[var]
        elif value and credential_header(name):
            warn(f"the {name} header's value is on the command line, visible in "
                 f"ps and shell history; pass it as '{name}: {ENV_VALUE}VAR' instead")
        out[name] = value
    return out


def _pick(opts: dict[str, Any], file_section: dict[str, Any], key: str, default: Any) -> Any:
    """Flag, else config file, else default."""
    value = opts.get(key)
    if value is not None:
        return value
    return file_section.get(key, default)


def check_output_paths(*paths: Path | None) -> None:
    """Refuse a file output that cannot be written, before the probe (``doctor.user_paths``):
    found only afterwards, an unwritable ``--html`` or ``-o`` cost the whole probe."""
    for path in paths:
        check_output_file(path)


def check_bundle_path(path: Path | None) -> None:
    """``--bundle`` (``diagnose``, ``load``): a file; the run reads its evidence back from it, so
    ``-`` (stdout) cannot be one (``collect -o -`` prints a bundle)."""
    if is_stdout(path):
        raise UsageError("--bundle keeps the evidence in a file the run reads back: '-' (stdout) is for --json, --md and --html, "
                         "or collect -o -")
    check_output_file(path)


def build_collect_config(opts: dict[str, Any], cfg: FileConfig, command: str) -> CollectConfig:
    """Flags over the config file over defaults, every value checked before anything is sent."""
    t, p = cfg.targets, cfg.probe
    route = _pick(opts, p, "route", PLAN.route)
    if route not in ROUTES:
        raise UsageError(f"--route must be one of {', '.join(ROUTES)}, got {route!r}")
    payload = None
    payload_path = _pick(opts, p, "payload", None)
    if payload_path:
        try:
            payload = wire.loads(Path(payload_path).read_bytes().decode("utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read --payload {payload_path}: {exc.strerror}") from None
        except UnicodeDecodeError as exc:
            raise UsageError(f"--payload {payload_path} is not UTF-8 text (byte {exc.start})") from None
        except wire.WireError as exc:  # not JSON, nested too deep, a number too long
            raise UsageError(f"--payload {payload_path}: {exc}") from None
        if not isinstance(payload, dict):
            raise UsageError(f"--payload {payload_path} must hold a JSON object")
    log = _pick(opts, t, "log", None)
    if log and (why := logfile.unreadable(str(log))):
        raise UsageError(f"--log: {why}")
    model_dir = _pick(opts, t, "model_dir", None)
    if model_dir:
        try:  # readable now; what it holds is evidence, read by the probe
            load_config_text(model_dir)
        except ConfigError as exc:
            raise UsageError(f"--model-dir: {exc}") from None
    verify: bool | str = True
    if opts.get("insecure"):
        verify = False
    elif opts.get("ca_cert") or p.get("ca_cert"):
        verify = str(opts.get("ca_cert") or p.get("ca_cert"))
        try:
            Path(verify).open("rb").close()
        except OSError as exc:
            raise UsageError(f"--ca-cert {verify}: {exc.strerror or exc}") from None
    api_key_env = opts.get("api_key_env") or p.get("api_key_env") or API_KEY_ENV
    http = HttpOptions(
        api_key=_api_key(api_key_env, opts.get("api_key_file") or p.get("api_key_file")),
        headers=_headers(opts.get("header")),
        verify=verify,
    )
    run_fields = {k: _pick(opts, cfg.run, k, None) for k in ("provider", "region", "client_location")}
    run_fields = {k: v for k, v in run_fields.items() if v is not None}
    labels = {k: str(v) for k, v in cfg.run.items() if k not in ("provider", "region", "client_location")}
    if labels:
        run_fields["labels"] = labels
    try:
        payload_file = _pick(opts, p, "gateway_payload", None)
        edge = edge_settings(_pick(opts, p, "gateway_route", None), str(payload_file) if payload_file else None,
                             _pick(opts, p, "framing", None), _pick(opts, p, "text_field", None),
                             _pick(opts, t, "gateway_kind", None), framings=tuple(FRAMINGS))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    fleet = check_fleet(opts, cfg, command)  # resolved once: a k8s:// Service's endpoints are asked for here
    config = CollectConfig(
        command=command,
        engine=fleet[0] if fleet else None,
        fleet=fleet if len(fleet) > 1 else [],
        gateway=_url(_pick(opts, t, "gateway", None), "--gateway"),
        route=route,
        payload=payload,
        payload_source=str(payload_path) if payload_path else None,
        gateway_route=edge.route,
        gateway_payload_source=edge.payload_source,
        framing=edge.framing,
        text_field=edge.text_field,
        gateway_kind=edge.kind,
        model=_pick(opts, p, "model", None),
        prompt_tokens=_probe_number(opts, cfg, "prompt_tokens", PLAN.prompt_tokens, minimum=1, inclusive=True, maximum=MAX_TOKENS),
        max_tokens=_probe_number(opts, cfg, "max_tokens", PLAN.max_tokens, minimum=1, inclusive=True, maximum=MAX_TOKENS),
        concurrency=_probe_number(opts, cfg, "concurrency", PLAN.concurrency, minimum=1, inclusive=True, maximum=MAX_STREAMS),
        requests=_probe_number(opts, cfg, "requests", PLAN.requests, minimum=1, inclusive=True, maximum=MAX_REQUESTS),
        duration_s=float(_probe_number(opts, cfg, "duration", PLAN.duration_s, minimum=0, maximum=MAX_SECONDS)),
        warmup=_probe_number(opts, cfg, "warmup", PLAN.warmup, minimum=0, inclusive=True, maximum=MAX_REQUESTS),
        rate=_probe_number(opts, cfg, "rate", PLAN.rate, minimum=0, maximum=MAX_RATE),
        stall_timeout_s=float(_probe_number(opts, cfg, "stall_timeout", PLAN.stall_timeout_s, minimum=0, maximum=MAX_SECONDS)),
        deadline_s=float(_probe_number(opts, cfg, "deadline", PLAN.deadline_s, minimum=0, maximum=MAX_SECONDS)),
        http=http,
        log=_pick(opts, t, "log", None),
        model_dir=_pick(opts, t, "model_dir", None),
        metrics_url=_url(_pick(opts, t, "metrics_url", None), "--metrics-url"),
        metrics=not opts.get("no_metrics", False),
        scrape_interval_s=float(_probe_number(opts, cfg, "scrape_interval", PLAN.scrape_interval_s, minimum=0, maximum=MAX_SECONDS)),
        prometheus=_url(_pick(opts, t, "prometheus", None), "--prometheus"),
        since_s=_since(opts.get("since") or t.get("since")),
        selector=opts.get("selector") or t.get("selector", ""),
        gpu=not opts.get("no_gpu", False),
        host=not opts.get("no_host", False),
        run_fields=run_fields,
        # the budgets the adaptive probe samples against: the analysis's own, flags over the file
        budgets=Budgets(ttft_s=_budget(opts, cfg, "ttft", run_fields.get("region"), BUDGETS.ttft_s),
                        tpot_s=_budget(opts, cfg, "tpot", run_fields.get("region"), BUDGETS.tpot_s)),
    )
    if config.engine and config.gateway and _same_place(config.engine, config.gateway):
        warn("--gateway is the same URL as --engine: both paths reach the engine directly, so they measure the same "
             "thing and no gateway latency can show; give the URL the application calls")
    if edge.route is not None and config.gateway is None:
        raise UsageError("--gateway-route needs --gateway: it is the route of the application's edge")
    if edge.route is not None and config.engine is None:
        warn(impossible_without_engine())
    return config


#: The commands that probe several ``--engine`` replicas in one run (a fleet).
FLEET_COMMANDS = ("diagnose", "watch")
#: Inputs that belong to one engine, so a fleet of several cannot say which replica they describe.
_ONE_ENGINE_ONLY = ("log", "model_dir", "metrics_url", "prometheus")


def fleet_engines(opts: dict[str, Any], cfg: FileConfig) -> list[str]:
    """Every ``--engine`` given (repeatable), else the config file's, each URL checked; a
    ``k8s://namespace/service:port`` is the Service's ready endpoints (``doctor.probes.kubernetes``)."""
    given = opts.get("engine")
    if given is None:
        given = cfg.targets.get("engine")
    engines: list[str] = []
    for url in [given] if isinstance(given, str) else list(given or []):
        if url.startswith(kubernetes.SCHEME):
            try:
                engines += kubernetes.resolve(kubernetes.parse_target(url), kubernetes.in_cluster_api())
            except kubernetes.KubeError as exc:
                raise UsageError(f"--engine {url}: {exc}") from None
        elif checked := _url(url, "--engine"):
            engines.append(checked)
    return engines


def check_fleet(opts: dict[str, Any], cfg: FileConfig, command: str) -> list[str]:
    """The replicas of a fleet run: several engines only where the command probes them one by one,
    and without the inputs of one engine (a log, a model directory, /metrics URL, Prometheus)."""
    engines = fleet_engines(opts, cfg)
    if len(engines) > 1:
        if command not in FLEET_COMMANDS:
            raise UsageError(f"several --engine are for {' and '.join(FLEET_COMMANDS)}; {command} probes one engine")
        for key in _ONE_ENGINE_ONLY:
            if _pick(opts, cfg.targets, key, None):
                raise UsageError(f"--{key.replace('_', '-')} describes one engine: not with several --engine")
    return engines


def _budget(opts: dict[str, Any], cfg: FileConfig, name: str, region: str | None, default: float) -> float:
    """A latency budget: the flag, else the config file (the region's value first), else ``default``.

    A budget of 0 or less would turn every run into a symptom or a nonsense "healthy within
    -1.00 s" verdict, so it is refused, and an explicit value is never replaced by the default.
    """
    flag = opts.get(f"{name}_budget")
    if flag is not None:
        return bounded(flag, f"--{name}-budget", minimum=0)
    value = cfg.budget(name, region)
    if value is None:
        return default
    regional = name in cfg.budgets.get("regions", {}).get(region or "", {})
    return bounded(value, f"[budgets{'.regions.' + str(region) if regional else ''}] {name} in {cfg.path}", minimum=0)


def build_analyze_options(opts: dict[str, Any], cfg: FileConfig, region: str | None) -> AnalyzeOptions:
    """Selection, thresholds, budgets and ``--fail-on`` for ``analyze``: flags over the config file."""
    a = cfg.analysis
    settings = {k: dict(v) for k, v in cfg.checks.items()}
    for check, values in parse_set(opts.get("set") or []).items():
        settings[check] = {**settings.pop(check, {}), **values}  # last: a later key wins (runner.settings_for)
    budgets = Budgets(
        ttft_s=_budget(opts, cfg, "ttft", region, BUDGETS.ttft_s),
        tpot_s=_budget(opts, cfg, "tpot", region, BUDGETS.tpot_s),
    )
    return AnalyzeOptions(
        select=_split(opts.get("select")) or list(a.get("select", [])),
        ignore=_split(opts.get("ignore")) or list(a.get("ignore", [])),
        settings=settings,
        budgets=budgets,
        fail_on=check_output_options(opts, cfg),
    )


#: What ``--format`` may print to stdout; the first is the default.
FORMATS = ("text", "json")


def check_output_options(opts: dict[str, Any], cfg: FileConfig) -> FailOn:
    """Validate ``--format`` and ``--fail-on``; return the ``--fail-on`` level.

    Called before anything is probed or written, so that a typo does not cost a probe run or
    leave a report file behind next to the error.
    """
    fmt = opts.get("format") or FORMATS[0]
    if fmt not in FORMATS:
        raise UsageError(f"--format must be {' or '.join(FORMATS)}, got {fmt!r}")
    piped_output(opts)  # at most one document on stdout
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


def require_evidence_source(config: CollectConfig, verb: str) -> None:
    """Refuse a run that would read nothing: no target, no log and no Prometheus."""
    if not config.targets() and not config.log and not config.prometheus:
        raise UsageError(f"nothing to {verb}: give --engine and/or --gateway, --log, or --prometheus")


#: ``Practical``'s fields by the flag (``--min-change``) and ``[compare]`` key (``min_change``) that set them.
PRACTICAL_KEYS = {"relative": "min_change", "ttft_s": "min_ttft_change", "tpot_s": "min_tpot_change"}


def build_practical(opts: dict[str, Any], cfg: FileConfig) -> Practical:
    """The smallest shift a comparison calls a regression: each flag, else ``[compare]`` of the
    config file (checked when it was loaded), else ``Practical``'s default."""
    values: dict[str, float] = {}
    for name, key in PRACTICAL_KEYS.items():
        if opts.get(key) is not None:
            values[name] = float(bounded(opts[key], "--" + key.replace("_", "-"), minimum=0, inclusive=True))
        elif cfg.compare.get(key) is not None:
            values[name] = float(cfg.compare[key])
    return Practical(**values)


def check_baseline_folder(opts: dict[str, Any]) -> Path | None:
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


def check_export_options(opts: dict[str, Any]) -> ExportTargets:
    """Validate the metrics outputs before anything is probed: a typo must not cost a probe run.

    The textfile must be writable and its folder must already exist (node_exporter reads a fixed
    folder; creating a misspelt one would export into nowhere), and the Pushgateway must be an
    http(s) URL.
    """
    textfile = opts.get("metrics_textfile")
    if textfile is not None:
        textfile = Path(textfile)
        check_output_file(textfile, "--metrics-textfile")
    return ExportTargets(textfile=textfile, pushgateway=_url(opts.get("pushgateway"), "--pushgateway"))


@dataclass(frozen=True)
class WatchPlan:
    """How ``watch`` repeats: the period, how many rounds (None: until SIGTERM), where it serves
    and keeps, how often a down target is retried within a round, and the canary beside the target."""

    every_s: float
    count: int | None = None
    listen: tuple[str, int] | None = None
    history: Path | None = None
    keep: int = 100
    retries: int = 3
    canary_engine: str | None = None
    canary_gateway: str | None = None

    @property
    def canary(self) -> bool:
        return bool(self.canary_engine or self.canary_gateway)


def build_watch_plan(every: str, count: int | None, listen: str | None, history: Path | None, keep: int, *,
                     retries: int = WatchPlan.retries, canary_engine: str | None = None,
                     canary_gateway: str | None = None) -> WatchPlan:
    """Checked before the first round: a bad period, count, address, retention or canary URL is a usage error."""
    if count is not None and count < 1:
        raise UsageError(f"--count must be at least 1, got {count}")
    if keep < 1:
        raise UsageError(f"--keep must be at least 1, got {keep}")
    if retries < 0:
        raise UsageError(f"--retries must be 0 or more, got {retries}")
    address = None
    if listen is not None:
        host, sep, port = listen.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UsageError(f"--listen expects HOST:PORT with a port in 1-65535, got {listen!r}")
        address = (host.strip("[]"), int(port))
    check_output_folder(history, "--history")
    return WatchPlan(every_s=_seconds(every, "--every", MAX_EVERY_S), count=count, listen=address, history=history, keep=keep,
                     retries=retries, canary_engine=_url(canary_engine, "--canary-engine"),
                     canary_gateway=_url(canary_gateway, "--canary-gateway"))
