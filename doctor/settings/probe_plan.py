"""The probe plan of a run (``CollectConfig``): targets, route, payload, load shape, TLS and
credentials, engine evidence and the run record, flags over the config file over the defaults.

Every value is checked while it is resolved, before anything is sent. A ``k8s://`` engine is
only parsed here: asking the Kubernetes API for its endpoints is ``lookup_engines``, a step the
command calls (``doctor.settings.lookup_targets``), never a side effect of reading the flags.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from doctor.evidence.stream import FRAMINGS
from doctor.foundation import wire
from doctor.foundation.console import warn
from doctor.foundation.errors import UsageError
from doctor.foundation.user_paths import check_output_file, is_stdout
from doctor.model import Budgets
from doctor.probes import kubernetes, logfile
from doctor.probes.gateway_route import edge_settings, impossible_without_engine
from doctor.probes.http import HttpOptions
from doctor.probes.lengths import MAX_TOKENS
from doctor.probes.payload import ROUTES
from doctor.probes.plan import MAX_RATE, MAX_REQUESTS, MAX_SECONDS, MAX_STREAMS, CollectConfig
from doctor.settings.config_file import FileConfig
from doctor.settings.values import (
    API_KEY_ENV,
    BUDGETS,
    PLAN,
    Flags,
    api_key,
    bounded,
    checked_url,
    headers,
    pick,
    plausible,
    probe_number,
    same_place,
    since,
)
from doctor.sizing.architecture import ConfigError, load_config_text


def check_output_paths(*paths: Path | None) -> None:
    """Refuse a file output that cannot be written, before the probe (``doctor.foundation.user_paths``):
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


def build_collect_config(opts: Flags, cfg: FileConfig, command: str) -> CollectConfig:
    """Flags over the config file over defaults, every value checked before anything is sent.

    The engines are the ``--engine`` URLs given; a ``k8s://`` target among them leaves ``engine``
    and ``fleet`` empty until ``lookup_engines`` has asked the Kubernetes API for its endpoints.
    """
    t, p = cfg.targets, cfg.probe
    route = pick(opts, p, "route", PLAN.route)
    if route not in ROUTES:
        raise UsageError(f"--route must be one of {', '.join(ROUTES)}, got {route!r}")
    payload = None
    payload_path = pick(opts, p, "payload", None)
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
    log = pick(opts, t, "log", None)
    if log and (why := logfile.unreadable(str(log))):
        raise UsageError(f"--log: {why}")
    model_dir = pick(opts, t, "model_dir", None)
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
        api_key=api_key(api_key_env, opts.get("api_key_file") or p.get("api_key_file")),
        headers=headers(opts.get("header")),
        verify=verify,
    )
    run_fields = {k: pick(opts, cfg.run, k, None) for k in ("provider", "region", "client_location")}
    run_fields = {k: v for k, v in run_fields.items() if v is not None}
    labels = {k: str(v) for k, v in cfg.run.items() if k not in ("provider", "region", "client_location")}
    if labels:
        run_fields["labels"] = labels
    try:
        payload_file = pick(opts, p, "gateway_payload", None)
        edge = edge_settings(pick(opts, p, "gateway_route", None), str(payload_file) if payload_file else None,
                             pick(opts, p, "framing", None), pick(opts, p, "text_field", None),
                             pick(opts, t, "gateway_kind", None), framings=tuple(FRAMINGS))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    given = given_engines(opts, cfg)
    pending = any(is_kubernetes(e) for e in given)
    fleet = [] if pending else check_fleet(list(given), one_engine_inputs(opts, cfg))
    router = checked_url(pick(opts, t, "router", None), "--router")
    try:  # the router's flags as its Deployment or command line spells them
        router_args = tuple(shlex.split(str(pick(opts, t, "router_args", "") or "")))
    except ValueError as exc:
        raise UsageError(f"--router-args: {exc}") from None
    router_log = pick(opts, t, "router_log", None)
    if router_log and (why := logfile.unreadable(str(router_log))):
        raise UsageError(f"--router-log: {why}")
    config = CollectConfig(
        command=command,
        engine=fleet[0] if fleet else None,
        fleet=fleet if len(fleet) > 1 else [],
        gateway=checked_url(pick(opts, t, "gateway", None), "--gateway") or router,
        router=router,
        router_metrics_url=checked_url(pick(opts, t, "router_metrics", None), "--router-metrics"),
        router_args=router_args,
        router_log=router_log,
        route=route,
        payload=payload,
        payload_source=str(payload_path) if payload_path else None,
        gateway_route=edge.route,
        gateway_payload_source=edge.payload_source,
        framing=edge.framing,
        text_field=edge.text_field,
        gateway_kind=edge.kind,
        model=pick(opts, p, "model", None),
        prompt_tokens=probe_number(opts, cfg, "prompt_tokens", PLAN.prompt_tokens, minimum=1, inclusive=True, maximum=MAX_TOKENS),
        max_tokens=probe_number(opts, cfg, "max_tokens", PLAN.max_tokens, minimum=1, inclusive=True, maximum=MAX_TOKENS),
        concurrency=probe_number(opts, cfg, "concurrency", PLAN.concurrency, minimum=1, inclusive=True, maximum=MAX_STREAMS),
        requests=probe_number(opts, cfg, "requests", PLAN.requests, minimum=1, inclusive=True, maximum=MAX_REQUESTS),
        duration_s=float(probe_number(opts, cfg, "duration", PLAN.duration_s, minimum=0, maximum=MAX_SECONDS)),
        warmup=probe_number(opts, cfg, "warmup", PLAN.warmup, minimum=0, inclusive=True, maximum=MAX_REQUESTS),
        rate=probe_number(opts, cfg, "rate", PLAN.rate, minimum=0, maximum=MAX_RATE),
        stall_timeout_s=float(probe_number(opts, cfg, "stall_timeout", PLAN.stall_timeout_s, minimum=0, maximum=MAX_SECONDS)),
        deadline_s=float(probe_number(opts, cfg, "deadline", PLAN.deadline_s, minimum=0, maximum=MAX_SECONDS)),
        http=http,
        log=pick(opts, t, "log", None),
        model_dir=pick(opts, t, "model_dir", None),
        metrics_url=checked_url(pick(opts, t, "metrics_url", None), "--metrics-url"),
        metrics=not opts.get("no_metrics", False),
        scrape_interval_s=float(probe_number(opts, cfg, "scrape_interval", PLAN.scrape_interval_s, minimum=0, maximum=MAX_SECONDS)),
        prometheus=checked_url(pick(opts, t, "prometheus", None), "--prometheus"),
        since_s=since(opts.get("since") or t.get("since")),
        selector=opts.get("selector") or t.get("selector", ""),
        gpu=not opts.get("no_gpu", False),
        host=not opts.get("no_host", False),
        run_fields=run_fields,
        # the budgets the adaptive probe samples against: the analysis's own, flags over the file
        budgets=Budgets(ttft_s=budget(opts, cfg, "ttft", run_fields.get("region"), BUDGETS.ttft_s),
                        tpot_s=budget(opts, cfg, "tpot", run_fields.get("region"), BUDGETS.tpot_s)),
        client_workers=client_workers(opts, cfg),
        trace_context=not opts.get("no_trace_context", False),
        otlp_listen=listen_address(pick(opts, t, "otlp_listen", None)),
        traces=checked_url(pick(opts, t, "traces", None), "--traces"),
        traces_headers=headers(opts.get("traces_header"), flag="--traces-header"),
    )
    if not pending:
        warn_same_place(config)
    if edge.route is not None and config.gateway is None:
        raise UsageError("--gateway-route needs --gateway: it is the route of the application's edge")
    if edge.route is not None and config.engine is None and not pending:
        warn(impossible_without_engine())
    return config


def client_workers(opts: Flags, cfg: FileConfig) -> int | None:
    """``--client-workers``, else ``[probe] client_workers`` of the config file, checked as any count
    (``probe_number``); None when neither says (``doctor.probes.stream.shard_workers`` chooses:
    one process for a diagnosis, one per 64 streams for a load run)."""
    workers = probe_number(opts, cfg, "client_workers", None, minimum=1, inclusive=True, maximum=MAX_WORKERS)
    return None if workers is None else int(workers)


def listen_address(value: str | None) -> str | None:
    """``--otlp-listen`` as "HOST:PORT" (a bare PORT listens on loopback), checked before anything is
    sent; None when not given. Port 0 lets the system choose one, which the run prints at start."""
    if value is None:
        return None
    host, _, port = str(value).rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--otlp-listen must be HOST:PORT or PORT (e.g. 127.0.0.1:4318), got {value!r}")
    return f"{host}:{int(port)}"


def warn_same_place(config: CollectConfig) -> None:
    """Say when the gateway is the engine itself: the two paths would measure the same thing."""
    if config.engine and config.gateway and same_place(config.engine, config.gateway):
        warn("--gateway is the same URL as --engine: both paths reach the engine directly, so they measure the same "
             "thing and no gateway latency can show; give the URL the application calls")


#: Worker processes a run may read its streams with (``--client-workers``): far more than
#: the CPUs of any one client machine.
MAX_WORKERS = 256
#: Inputs that belong to one engine, so a fleet of several cannot say which replica they describe.
_ONE_ENGINE_ONLY = ("log", "model_dir", "metrics_url", "prometheus")


def is_kubernetes(engine: str) -> bool:
    """Whether ``engine`` names a Kubernetes Service (``k8s://namespace/service:port``), not a URL."""
    return engine.startswith(kubernetes.SCHEME)


def given_engines(opts: Flags, cfg: FileConfig) -> tuple[str, ...]:
    """Every ``--engine`` given (repeatable), else the config file's, each checked: a URL as a URL,
    a ``k8s://namespace/service:port`` for its form only (nothing is asked of the API here)."""
    given = opts.get("engine")
    if given is None:
        given = cfg.targets.get("engine")
    engines: list[str] = []
    for url in [given] if isinstance(given, str) else list(given or []):
        if is_kubernetes(url):
            try:
                kubernetes.parse_target(url)
            except kubernetes.KubeError as exc:
                raise UsageError(f"--engine {url}: {exc}") from None
            engines.append(url)
        elif checked := checked_url(url, "--engine"):
            engines.append(checked)
    return tuple(engines)


def lookup_engines(given: tuple[str, ...]) -> list[str]:
    """The engines' URLs, each ``k8s://`` target replaced by its Service's ready endpoints
    (``doctor.probes.kubernetes``, a call to the Kubernetes API)."""
    engines: list[str] = []
    for url in given:
        if not is_kubernetes(url):
            engines.append(url)
            continue
        try:
            engines += kubernetes.resolve(kubernetes.parse_target(url), kubernetes.in_cluster_api())
        except kubernetes.KubeError as exc:
            raise UsageError(f"--engine {url}: {exc}") from None
    return engines


def one_engine_inputs(opts: Flags, cfg: FileConfig) -> dict[str, Any]:
    """The inputs that belong to one engine (``_ONE_ENGINE_ONLY``), as given."""
    return {key: pick(opts, cfg.targets, key, None) for key in _ONE_ENGINE_ONLY}


def check_fleet(engines: list[str], inputs: dict[str, Any]) -> list[str]:
    """The replicas of a fleet run, without the inputs of one engine (a log, a model directory,
    /metrics URL, Prometheus). Which commands take several is their settings' (``Takes.fleet``)."""
    if len(engines) > 1:
        for key, value in inputs.items():
            if value:
                raise UsageError(f"--{key.replace('_', '-')} describes one engine: not with several --engine")
    return engines


def budget(opts: Flags, cfg: FileConfig, name: str, region: str | None, default: float) -> float:
    """A latency budget: the flag, else the config file (the region's value first), else ``default``.

    A budget of 0 or less would turn every run into a symptom or a nonsense "healthy within
    -1.00 s" verdict, so it is refused, and an explicit value is never replaced by the default.
    """
    flag = opts.get(f"{name}_budget")
    if flag is not None:
        return plausible(bounded(flag, f"--{name}-budget", minimum=0), f"--{name}-budget", name)
    value = cfg.budget(name, region)
    if value is None:
        return default
    regional = name in cfg.budgets.get("regions", {}).get(region or "", {})
    where = f"[budgets{'.regions.' + str(region) if regional else ''}] {name} in {cfg.path}"
    return plausible(bounded(value, where, minimum=0), where, name)

