"""The ``llm-doctor`` command line (typer).

``diagnose`` is literally ``collect`` into a bundle file followed by ``analyze`` of that file,
so every live run also exercises the offline path. Option groups shared by several commands
are declared once (``TARGET_OPTIONS`` ...) and attached with ``uses(...)``, which extends the
command's signature: typer reads signatures, so the groups stay single-sourced.
"""

import functools
import inspect
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.markup import escape

from doctor import __version__
from doctor.bundle import load_path, save
from doctor.collect import collect
from doctor.config import FileConfig, load_config, parse_set, with_recorded_analysis
from doctor.errors import DoctorError, UsageError
from doctor.evidence import Bundle
from doctor.exit_codes import ExitCode
from doctor.model import Budgets, Report, Severity, Symptom
from doctor.probes.http import HttpOptions, credential_header
from doctor.probes.payload import ROUTES
from doctor.probes.plan import CollectConfig
from doctor.redact import Redactor
from doctor.registry import CATALOGUE_HINT, Registry, load_registry
from doctor.runner import AnalyzeOptions, analyze, known_analysis, validate_settings, with_analysis

app = typer.Typer(
    name="llm-doctor",
    help="Where the latency of a self-hosted LLM stack (vLLM behind a streaming gateway) is created, "
    "why, and the one setting to change.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)
err = Console(stderr=True, soft_wrap=True)  # messages stay one grep-able line


def _opt(annotation: Any, default: Any, *decls: str, help: str, **kw: Any) -> inspect.Parameter:
    """One reusable option, as a keyword-only parameter typer can read."""
    return inspect.Parameter(
        decls[0].lstrip("-").replace("-", "_"),
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[annotation, typer.Option(*decls, help=help, **kw)],
    )


P = "Targets and probe"
E = "Engine evidence"
R = "Run record"
A = "Analysis and output"

TARGET_OPTIONS = [
    _opt(str | None, None, "--engine", help="vLLM base URL, probed directly (e.g. http://10.0.0.5:8000).", rich_help_panel=P),
    _opt(str | None, None, "--gateway", help="What the application calls (nginx, FastAPI edge...).", rich_help_panel=P),
    _opt(str | None, None, "--route", help="completions | chat | responses (default chat).", rich_help_panel=P),
    _opt(Path | None, None, "--payload", help="The application's own JSON request body; stream is forced on.", rich_help_panel=P),
    _opt(str | None, None, "--model", help="Model id (default: the first id of /v1/models).", rich_help_panel=P),
    _opt(int | None, None, "--prompt-tokens", help="Default prompt length in tokens (about).", rich_help_panel=P),
    _opt(int | None, None, "--max-tokens", help="Output tokens asked for (a fixed length where the server honours it).", rich_help_panel=P),
    _opt(int | None, None, "--concurrency", help="Streams in flight per path (default 1).", rich_help_panel=P),
    _opt(int | None, None, "--requests", help="Measured requests per path (default 8).", rich_help_panel=P),
    _opt(int | None, None, "--warmup", help="Warm-up requests per path, excluded from statistics (default 1).", rich_help_panel=P),
    _opt(float | None, None, "--rate", help="Poisson arrivals per second instead of a closed loop.", rich_help_panel=P),
    _opt(float | None, None, "--stall-timeout", help="Fail a request after this many seconds without a byte (default 30).", rich_help_panel=P),
    _opt(float | None, None, "--deadline", help="Overall probe deadline in seconds (default 300).", rich_help_panel=P),
    _opt(str | None, None, "--api-key-env", help="Environment variable holding the API key (default OPENAI_API_KEY).", rich_help_panel=P),
    _opt(Path | None, None, "--api-key-file", help="File holding the API key.", rich_help_panel=P),
    _opt(Path | None, None, "--ca-cert", help="CA bundle for TLS verification.", rich_help_panel=P),
    _opt(bool, False, "--insecure", help="Do not verify TLS certificates.", rich_help_panel=P),
    _opt(list[str] | None, None, "--header", help="Extra request header 'Name: value', or 'Name: @env:VAR' to read the value from the environment (repeatable; redacted in output).", rich_help_panel=P),
]
ENGINE_OPTIONS = [
    _opt(str | None, None, "--log", help="vLLM log file ('-' = stdin, .gz accepted).", rich_help_panel=E),
    _opt(str | None, None, "--metrics-url", help="/metrics URL (default: engine URL + /metrics).", rich_help_panel=E),
    _opt(bool, False, "--no-metrics", help="Do not scrape /metrics.", rich_help_panel=E),
    _opt(float | None, None, "--scrape-interval", help="Seconds between /metrics scrapes during the probe (default 1).", rich_help_panel=E),
    _opt(str | None, None, "--prometheus", help="Prometheus URL: read the incident window's history.", rich_help_panel=E),
    _opt(str | None, None, "--since", help="History window for --prometheus (e.g. 15m, 2h; default 15m).", rich_help_panel=E),
    _opt(str, "", "--selector", help="Label selector for --prometheus, e.g. '{job=\"vllm\"}'.", rich_help_panel=E),
    _opt(bool, False, "--no-gpu", help="Skip NVML.", rich_help_panel=E),
    _opt(bool, False, "--no-host", help="Skip host facts (psutil).", rich_help_panel=E),
]
RUN_OPTIONS = [
    _opt(str | None, None, "--provider", help="Cloud or datacenter, for the run record.", rich_help_panel=R),
    _opt(str | None, None, "--region", help="Region (also selects per-region budgets).", rich_help_panel=R),
    _opt(str | None, None, "--client-location", help="Where the probe ran from.", rich_help_panel=R),
]
ANALYSIS_OPTIONS = [
    _opt(list[str] | None, None, "--select", help="Only these checks: codes, code prefixes or names (repeatable, or comma-separated).", rich_help_panel=A),
    _opt(list[str] | None, None, "--ignore", help="Skip these checks (as --select).", rich_help_panel=A),
    _opt(list[str] | None, None, "--set", help="Override a threshold: CHECK.OPTION=VALUE (repeatable).", rich_help_panel=A),
    _opt(str | None, None, "--fail-on", help="Exit 1 at or above: info | warning | critical (default warning).", rich_help_panel=A),
    _opt(float | None, None, "--ttft-budget", help="Time-to-first-token budget in seconds (default 0.5).", rich_help_panel=A),
    _opt(float | None, None, "--tpot-budget", help="Time-per-output-token budget in seconds (default 0.05).", rich_help_panel=A),
    _opt(Path | None, None, "--json", help="Write the JSON report to PATH (--format json prints it to stdout instead).", rich_help_panel=A),
    _opt(Path | None, None, "--html", help="Write the self-contained HTML report here.", rich_help_panel=A),
    _opt(Path | None, None, "--md", help="Write a short Markdown summary here.", rich_help_panel=A),
    _opt(str, "text", "--format", help="What to print to stdout: text | json (the whole JSON report).", rich_help_panel=A),
    _opt(bool, False, "--verbose", "-v", help="Also show the evidence values, every check's outcome, and the per-path, startup-log and metrics tables.", rich_help_panel=A),
]
CONFIG_OPTION = [_opt(Path | None, None, "--config", help="TOML config (default ./llm-doctor.toml when present).")]


def uses(*groups: list[inspect.Parameter]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Add option groups to a command; they reach it as one ``opts`` dict."""

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn)
        own = [p for p in sig.parameters.values() if p.name != "opts"]
        extra = [p for group in groups for p in group]
        names = {p.name for p in extra}

        @functools.wraps(fn)
        def wrapper(**kwargs: Any) -> Any:
            opts = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
            return fn(opts=opts, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
        return wrapper

    return deco


def _split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


def _seconds(text: str) -> float:
    """``15m`` / ``2h`` / ``900`` -> seconds; a history window must be finite and positive."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"--since expects a positive duration like 15m, 2h or 900, got {text!r}")
    return value


def _bounded(value: Any, where: str, *, minimum: float, inclusive: bool = False) -> Any:
    """``value`` when finite and above ``minimum`` (or equal to it, when ``inclusive``).

    Without this, ``--ttft-budget -1`` yields a "healthy within -1.00 s" verdict and ``--rate 0``
    or ``--deadline inf`` a probe that never ends; ``where`` names the flag or config key.
    """
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float is not a sane count either
        finite = False
    if not finite or value < minimum or (value == minimum and not inclusive):
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        raise UsageError(f"{where} must be a finite number {bound}, got {value!r}")
    return value


def _probe_number(opts: dict[str, Any], cfg: FileConfig, key: str, default: Any, *, minimum: float, inclusive: bool = False) -> Any:
    """A numeric probe setting: the flag, else ``[probe]`` of the config file, else ``default``.

    ``is not None`` rather than ``or``, so that an explicit 0 is checked, not replaced.
    """
    if opts.get(key) is not None:
        return _bounded(opts[key], "--" + key.replace("_", "-"), minimum=minimum, inclusive=inclusive)
    if cfg.probe.get(key) is not None:
        return _bounded(cfg.probe[key], f"[probe] {key} in {cfg.path}", minimum=minimum, inclusive=inclusive)
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


def _api_key(opts: dict[str, Any]) -> str | None:
    path = opts.get("api_key_file")
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise UsageError(f"cannot read --api-key-file {path}: {exc.strerror}") from None
    return os.environ.get(opts.get("api_key_env") or "OPENAI_API_KEY") or None


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
            err.print(f"[yellow]warning:[/] the {escape(name)} header's value is on the command line, visible in "
                      f"ps and shell history; pass it as '{escape(name)}: {ENV_VALUE}VAR' instead", highlight=False)
        out[name] = value
    return out


def _pick(opts: dict[str, Any], file_section: dict[str, Any], key: str, default: Any) -> Any:
    """Flag, else config file, else default."""
    value = opts.get(key)
    if value is not None:
        return value
    return file_section.get(key, default)


def build_collect_config(opts: dict[str, Any], cfg: FileConfig, command: str) -> CollectConfig:
    """Flags over the config file over defaults, every value checked before anything is sent."""
    t, p = cfg.targets, cfg.probe
    route = _pick(opts, p, "route", "chat")
    if route not in ROUTES:
        raise UsageError(f"--route must be one of {', '.join(ROUTES)}, got {route!r}")
    payload = None
    payload_path = _pick(opts, p, "payload", None)
    if payload_path:
        try:
            payload = json.loads(Path(payload_path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read --payload {payload_path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise UsageError(f"--payload {payload_path} is not JSON: {exc.msg} at line {exc.lineno}") from None
        if not isinstance(payload, dict):
            raise UsageError(f"--payload {payload_path} must hold a JSON object")
    verify: bool | str = True
    if opts.get("insecure"):
        verify = False
    elif opts.get("ca_cert") or p.get("ca_cert"):
        verify = str(opts.get("ca_cert") or p.get("ca_cert"))
    api_key_env = opts.get("api_key_env") or p.get("api_key_env") or "OPENAI_API_KEY"
    http = HttpOptions(
        api_key=_api_key({**opts, "api_key_env": api_key_env, "api_key_file": opts.get("api_key_file") or p.get("api_key_file")}),
        headers=_headers(opts.get("header")),
        verify=verify,
    )
    run_fields = {k: _pick(opts, cfg.run, k, None) for k in ("provider", "region", "client_location")}
    run_fields = {k: v for k, v in run_fields.items() if v is not None}
    labels = {k: str(v) for k, v in cfg.run.items() if k not in ("provider", "region", "client_location")}
    if labels:
        run_fields["labels"] = labels
    config = CollectConfig(
        command=command,
        engine=_url(_pick(opts, t, "engine", None), "--engine"),
        gateway=_url(_pick(opts, t, "gateway", None), "--gateway"),
        route=route,
        payload=payload,
        payload_source=str(payload_path) if payload_path else None,
        model=_pick(opts, p, "model", None),
        prompt_tokens=_probe_number(opts, cfg, "prompt_tokens", 256, minimum=1, inclusive=True),
        max_tokens=_probe_number(opts, cfg, "max_tokens", 64, minimum=1, inclusive=True),
        concurrency=_probe_number(opts, cfg, "concurrency", 1, minimum=1, inclusive=True),
        requests=_probe_number(opts, cfg, "requests", 8, minimum=0, inclusive=True),
        warmup=_probe_number(opts, cfg, "warmup", 1, minimum=0, inclusive=True),
        rate=_probe_number(opts, cfg, "rate", None, minimum=0),
        stall_timeout_s=float(_probe_number(opts, cfg, "stall_timeout", 30.0, minimum=0)),
        deadline_s=float(_probe_number(opts, cfg, "deadline", 300.0, minimum=0)),
        http=http,
        log=_pick(opts, t, "log", None),
        metrics_url=_url(_pick(opts, t, "metrics_url", None), "--metrics-url"),
        metrics=not opts.get("no_metrics", False),
        scrape_interval_s=float(_probe_number(opts, cfg, "scrape_interval", 1.0, minimum=0)),
        prometheus=_url(_pick(opts, t, "prometheus", None), "--prometheus"),
        since_s=_seconds(str(opts.get("since") or t.get("since") or "15m")),
        selector=opts.get("selector") or t.get("selector", ""),
        gpu=not opts.get("no_gpu", False),
        host=not opts.get("no_host", False),
        run_fields=run_fields,
    )
    return config


def _budget(opts: dict[str, Any], cfg: FileConfig, name: str, region: str | None, default: float) -> float:
    """A latency budget: the flag, else the config file (the region's value first), else ``default``.

    A budget of 0 or less would turn every run into a symptom or a nonsense "healthy within
    -1.00 s" verdict, so it is refused, and an explicit value is never replaced by the default.
    """
    flag = opts.get(f"{name}_budget")
    if flag is not None:
        return _bounded(flag, f"--{name}-budget", minimum=0)
    value = cfg.budget(name, region)
    if value is None:
        return default
    regional = name in cfg.budgets.get("regions", {}).get(region or "", {})
    return _bounded(value, f"[budgets{'.regions.' + str(region) if regional else ''}] {name} in {cfg.path}", minimum=0)


def build_analyze_options(opts: dict[str, Any], cfg: FileConfig, region: str | None) -> AnalyzeOptions:
    """Selection, thresholds, budgets and ``--fail-on`` for ``analyze``: flags over the config file."""
    a = cfg.analysis
    settings = {k: dict(v) for k, v in cfg.checks.items()}
    for check, values in parse_set(opts.get("set") or []).items():
        settings[check] = {**settings.pop(check, {}), **values}  # last: a later key wins (runner.settings_for)
    budgets = Budgets(
        ttft_s=_budget(opts, cfg, "ttft", region, Budgets.ttft_s),
        tpot_s=_budget(opts, cfg, "tpot", region, Budgets.tpot_s),
    )
    return AnalyzeOptions(
        select=_split(opts.get("select")) or list(a.get("select", [])),
        ignore=_split(opts.get("ignore")) or list(a.get("ignore", [])),
        settings=settings,
        budgets=budgets,
        fail_on=check_output_options(opts, cfg),
    )


FORMATS = ("text", "json")


def check_output_options(opts: dict[str, Any], cfg: FileConfig) -> Severity:
    """Validate ``--format`` and ``--fail-on``; return the ``--fail-on`` severity.

    Called before anything is probed or written, so that a typo does not cost a probe run or
    leave a report file behind next to the error.
    """
    fmt = opts.get("format") or "text"
    if fmt not in FORMATS:
        raise UsageError(f"--format must be {' or '.join(FORMATS)}, got {fmt!r}")
    value = opts.get("fail_on") or cfg.analysis.get("fail_on") or "warning"
    try:
        return Severity(value)
    except ValueError:
        raise UsageError(f"--fail-on must be info, warning or critical, got {value!r}") from None


def checked_registry(options: AnalyzeOptions) -> Registry:
    """The check catalogue, with ``--select``/``--ignore`` keys and ``--set`` names verified.

    ``diagnose`` calls it before probing: an unknown key would otherwise surface only after
    the probe, and ``--select LD999`` would run no check at all and exit HEALTHY.
    """
    registry = load_registry()
    registry.select(options.select, options.ignore)
    validate_settings(registry, options.settings)
    return registry


def exit_code_for(report: Report, fail_on: Severity) -> ExitCode:
    """0 healthy; 1 a finding (or symptom) at or above ``fail_on``; else 2 when inconclusive.

    A finding at or above ``fail_on`` wins over an inconclusive verdict: a service refusing
    every request cannot be decomposed, yet that failure is itself a critical finding (LD501),
    and a health check must report it as a failure (1), not as "could not diagnose" (2).
    """
    ranks = [f.severity.rank for f in report.findings]
    if report.verdict.symptom in (Symptom.PRE_FIRST_TOKEN, Symptom.INTER_TOKEN, Symptom.PROXY_ONLY):
        ranks.append(Severity.WARNING.rank)
    if max(ranks, default=0) >= fail_on.rank:
        return ExitCode.SYMPTOM
    if report.verdict.symptom is Symptom.INCONCLUSIVE:
        return ExitCode.NO_DIAGNOSIS
    return ExitCode.HEALTHY


def emit(report: Report, opts: dict[str, Any], cfg: FileConfig) -> ExitCode:
    """Write the requested files, print the summary, and decide the exit code."""
    from reports import write_outputs
    from reports.json_doc import render_json
    from reports.terminal import print_report, stdout_console

    fail_on = check_output_options(opts, cfg)
    written = write_outputs(report, json_path=opts.get("json"), html_path=opts.get("html"), md_path=opts.get("md"))
    if (opts.get("format") or "text") == "json":
        sys.stdout.write(render_json(report))
    else:
        print_report(report, stdout_console(), verbose=bool(opts.get("verbose")))
    for path in written:
        err.print(f"wrote {path}")
    if report.bundle.interrupted:
        return ExitCode.INTERRUPTED
    return exit_code_for(report, fail_on)


def _progress(message: str) -> None:
    err.print(f"[dim]… {escape(message)}[/]", highlight=False)  # messages name URLs and paths: never markup


def run_guarded(fn: Callable[[], ExitCode | int]) -> None:
    """Domain errors become one red line and exit 2; Ctrl-C exits 130.

    The message is escaped: config errors name sections as ``[probe]``, which rich would
    otherwise swallow as markup.
    """
    try:
        code = fn()
    except DoctorError as exc:
        err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False)
        raise typer.Exit(ExitCode.NO_DIAGNOSIS) from None
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/]")
        raise typer.Exit(ExitCode.INTERRUPTED) from None
    raise typer.Exit(int(code))


def diagnose_config(opts: dict[str, Any], cfg: FileConfig, bundle_path: Path | None, command: str = "diagnose") -> ExitCode:
    """collect -> save -> load -> analyze -> emit: the live path goes through the offline one."""
    config = build_collect_config(opts, cfg, command)
    if not config.targets() and not config.log and not config.prometheus:
        raise UsageError("nothing to diagnose: give --engine and/or --gateway, --log, or --prometheus")
    check_output_options(opts, cfg)  # a bad --format or --fail-on fails before anything is sent
    analyze_opts = build_analyze_options(opts, cfg, config.run_fields.get("region"))
    registry = checked_registry(analyze_opts)
    bundle = with_analysis(collect(config, _progress), analyze_opts, registry)  # --bundle re-analyses alike
    with tempfile.TemporaryDirectory() as tmp:
        path = bundle_path or Path(tmp) / "bundle.json"
        save(bundle, path)
        if bundle_path:
            err.print(f"wrote {bundle_path}")
        report = analyze(load_path(path), analyze_opts, registry)
    return emit(report, opts, cfg)


@app.command()
@uses(TARGET_OPTIONS, ENGINE_OPTIONS, RUN_OPTIONS, ANALYSIS_OPTIONS, CONFIG_OPTION)
def diagnose(
    bundle: Annotated[Path | None, typer.Option("--bundle", help="Also keep the evidence bundle here (.json or .json.gz).")] = None,
    opts: dict[str, Any] = {},  # noqa: B006 - filled by uses()
) -> None:
    """Probe, read the engine's evidence, and say where the latency is and what to change.

    [bold]Examples[/]

      llm-doctor diagnose --engine http://vllm:8000 --gateway https://llm.example.com --log vllm.log

      llm-doctor diagnose --gateway https://llm.example.com --route responses --payload app-request.json --html report.html
    """
    if not any(opts.get(k) for k in ("json", "html", "md")):
        opts["html"] = Path("llm-doctor-report.html")
    run_guarded(lambda: diagnose_config(opts, load_config(opts.get("config")), bundle))


def usable_evidence(bundle: Bundle) -> bool:
    """Whether a bundle holds anything about the service a diagnosis can start from.

    A successful streamed request, log lines, a /metrics scrape or a Prometheus answer count;
    GPU and host facts do not: they describe a machine, and alone they say nothing about
    where the latency goes. ``collect`` exits 2 without any of these (the bundle is still
    written: its errors say why every probe failed).
    """
    return bool(
        (bundle.stream and any(r.ok for r in bundle.stream.requests))
        or (bundle.log and bundle.log.lines_total)
        or (bundle.metrics and any(s.error is None for s in bundle.metrics.scrapes))
        or (bundle.prometheus and any(q.error is None for q in bundle.prometheus.queries))
    )


@app.command("collect")
@uses(TARGET_OPTIONS, ENGINE_OPTIONS, RUN_OPTIONS, CONFIG_OPTION)
def collect_cmd(
    bundle: Annotated[Path, typer.Option("--bundle", "-o", help="Where to write the evidence bundle (.json or .json.gz).")] = Path("llm-doctor-bundle.json.gz"),
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Gather evidence into a bundle without analysing it (attach it, or `analyze` it later).

    [bold]Example[/]

      llm-doctor collect --engine http://vllm:8000 --log vllm.log -o incident-4711.json.gz
    """

    def run() -> ExitCode:
        cfg = load_config(opts.get("config"))
        config = build_collect_config(opts, cfg, "collect")
        if not config.targets() and not config.log and not config.prometheus:
            raise UsageError("nothing to collect: give --engine and/or --gateway, --log, or --prometheus")
        result = collect(config, _progress)
        save(result, bundle)
        err.print(f"wrote {bundle} ({len(result.errors)} evidence error(s))")
        if result.interrupted:
            return ExitCode.INTERRUPTED
        if not usable_evidence(result):
            err.print("[red]no usable evidence:[/] no request succeeded and no log, /metrics or Prometheus data was read")
            return ExitCode.NO_DIAGNOSIS
        return ExitCode.HEALTHY

    run_guarded(run)


@app.command("analyze")
@uses(ANALYSIS_OPTIONS, CONFIG_OPTION)
def analyze_cmd(
    source: Annotated[Path, typer.Argument(help="A bundle (.json, .json.gz) or a report (.json, .html) that embeds one.")],
    region: Annotated[str | None, typer.Option("--region", help="Select per-region budgets from the config.")] = None,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Re-analyse saved evidence. Never touches the network.

    A report (or a bundle kept by diagnose) re-analyses with the budgets, thresholds, selection
    and --fail-on it was made with; flags and an explicit --config change them.

    [bold]Examples[/]

      llm-doctor analyze incident-4711.json.gz --html report.html

      llm-doctor analyze report.html --set LD201.kv_full=0.9
    """

    def run() -> ExitCode:
        cfg = load_config(opts.get("config"))
        check_output_options(opts, cfg)  # before reading the bundle or writing any file
        bundle = load_path(source)
        registry = load_registry()
        recorded, dropped = known_analysis(bundle.run.analysis, registry)
        for warning in dropped:
            err.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
        cfg = with_recorded_analysis(cfg, recorded, explicit=opts.get("config") is not None)
        report = analyze(bundle, build_analyze_options(opts, cfg, region or bundle.run.region), registry)
        return emit(report, opts, cfg)

    run_guarded(run)


@app.command("probe")
@uses(TARGET_OPTIONS, CONFIG_OPTION)
def probe_cmd(
    bundle: Annotated[Path | None, typer.Option("--bundle", "-o", help="Also write the stream evidence as a bundle.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the per-path statistics as JSON to stdout (a switch, not a path).")] = False,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Only the streaming probe: per-path TTFT / TPOT / gaps / reads, direct vs gateway.

    [bold]Example[/]

      llm-doctor probe --engine http://vllm:8000 --gateway http://nginx:8080 --concurrency 4 --requests 16
    """
    from doctor.derive.missing import Missing
    from doctor.derive.stream_stats import derive_stream_stats
    from reports.stream_summary import print_stream_summary, stream_summary_json
    from reports.terminal import stdout_console

    def run() -> ExitCode:
        cfg = load_config(opts.get("config"))
        config = build_collect_config(opts, cfg, "probe")
        if not config.targets():
            raise UsageError("give --engine and/or --gateway")
        config.log = config.prometheus = None
        config.gpu = config.host = config.metrics = False
        result = collect(config, _progress)
        if bundle:
            save(result, bundle)
            err.print(f"wrote {bundle}")
        try:
            stats = derive_stream_stats(result)
        except Missing as exc:
            for e in result.errors:
                err.print(f"[red]evidence error[/] {escape(e.source)} ({escape(e.kind)}): {escape(e.message)}", highlight=False)
            err.print(f"[red]no stream statistics:[/] {escape(str(exc))}")
            return ExitCode.INTERRUPTED if result.interrupted else ExitCode.NO_DIAGNOSIS
        if as_json:
            sys.stdout.write(json.dumps(stream_summary_json(stats, result), indent=1) + "\n")
        else:
            print_stream_summary(stats, result, stdout_console())
        if result.interrupted:
            return ExitCode.INTERRUPTED
        ok = any(p.n_ok for p in stats.paths.values())
        return ExitCode.HEALTHY if ok else ExitCode.NO_DIAGNOSIS

    run_guarded(run)


@app.command("log")
def log_cmd(
    source: Annotated[str, typer.Argument(help="vLLM log file ('-' = stdin, .gz accepted).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON to stdout (a switch, not a path).")] = False,
) -> None:
    """Read a vLLM log: version, engine config, KV capacity, startup errors, stats over time.

    [bold]Examples[/]

      llm-doctor log vllm.log

      kubectl logs deploy/vllm | llm-doctor log - --json
    """
    from doctor.vllm_log.command import log_command_output

    def run() -> int:
        text, code = log_command_output(source, as_json)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return code

    run_guarded(run)


@app.command("checks")
def checks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON to stdout (a switch, not a path).")] = False,
) -> None:
    """List every check: code, name, symptom class, evidence it needs, options.

    [bold]Example[/]

      llm-doctor checks
    """
    from rich.table import Table

    from reports.terminal import stdout_console, unwrapped

    def run() -> ExitCode:
        registry = load_registry()
        if as_json:
            rows = [
                {"code": s.code, "name": s.name, "symptom": s.symptom.value, "cause": s.cause, "requires": list(s.requires),
                 "optional": list(s.optional), "options": s.options, "title": s.title, "origin": s.origin}
                for s in registry.checks
            ]
            sys.stdout.write(json.dumps(rows, indent=1) + "\n")
        else:
            # Codes, names and symptoms are what people grep for: never wrapped or shortened.
            table = Table(title=f"{len(registry.checks)} checks")
            for column in ("code", "name", "symptom"):
                table.add_column(column, no_wrap=True)
            for column in ("needs", "options"):
                table.add_column(column, overflow="fold")
            for s in registry.checks:
                table.add_row(s.code, s.name, s.symptom.value, "\n".join(s.requires),
                              "\n".join(f"{k}={v}" for k, v in s.options.items()))
            console = stdout_console()
            console.print(unwrapped(table, console))
        for w in registry.warnings:
            err.print(f"[yellow]warning:[/] {escape(w)}", highlight=False)
        return ExitCode.HEALTHY

    run_guarded(run)


@app.command("explain")
def explain_cmd(
    check: Annotated[str, typer.Argument(help="A check code (LD101) or name.")],
) -> None:
    """Print a check's documentation: what it detects, why it matters, evidence, remediation, example.

    [bold]Example[/]

      llm-doctor explain LD101
    """
    from doctor.check import DOC_HEADINGS

    def run() -> ExitCode:
        spec = load_registry().find(check)
        if spec is None:
            raise UsageError(f"no check {check!r}; {CATALOGUE_HINT}")
        out = [f"{spec.code} {spec.name} ({spec.symptom.value})", ""]
        for heading in DOC_HEADINGS:
            out += [f"## {heading}", spec.doc.get(heading, "(not documented)"), ""]
        if spec.options:
            out += ["## Options", *(f"  {spec.code}.{k} = {v!r}" for k, v in spec.options.items()), ""]
        sys.stdout.write("\n".join(out))
        return ExitCode.HEALTHY

    run_guarded(run)


@app.command("demo")
@uses(ANALYSIS_OPTIONS)
def demo_cmd(
    scenario: Annotated[str | None, typer.Option("--scenario", help="Which lab scenario to run (see --list; default proxy-buffering).")] = None,
    list_scenarios: Annotated[bool, typer.Option("--list", help="List the scenarios and exit.")] = False,
    out_dir: Annotated[Path, typer.Option("--out-dir", help="Where report.html and report.json go.")] = Path("."),
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Start an embedded vLLM-compatible engine and gateway, diagnose them, write report.html.

    [bold]Examples[/]

      llm-doctor demo

      llm-doctor demo --scenario queueing --out-dir /tmp/demo
    """
    from doctor.lab.demo import run_demo
    from doctor.lab.scenarios import DEFAULT_SCENARIO

    def run() -> ExitCode:
        check_output_options(opts, FileConfig())  # before the lab starts
        return run_demo(scenario or DEFAULT_SCENARIO, out_dir, opts, list_only=list_scenarios, progress=_progress)

    run_guarded(run)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"llm-doctor {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """llm-doctor: incidents, scheduled health checks, ticket-ready reports."""


def main() -> None:
    app()
