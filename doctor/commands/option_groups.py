"""The option groups several ``llm-doctor`` commands share, and the help panels they show under.

Declared once here and attached with ``uses(...)`` (``doctor.commands.options``), so a flag's
name, type and help text are the same on every command that takes it, and ``doctor.cli`` stays
the table of commands. Defaults quoted in the help text are read from the dataclasses through
``doctor.settings``, so the help never drifts from what ``resolve`` applies.
"""

from pathlib import Path

from doctor.commands.options import opt
from doctor.evidence.stream import FRAMINGS
from doctor.gateways import KINDS
from doctor.probes.payload import ROUTES
from doctor.settings import ANALYSIS, API_KEY_ENV, BUDGETS, FORMATS, PLAN, REFUSED_BUDGET_S, shown, shown_duration

TARGET_PANEL = "Targets and probe"
ENGINE_PANEL = "Engine evidence"
RUN_PANEL = "Run record"
ANALYSIS_PANEL = "Analysis and output"

TARGET_OPTIONS = [
    opt(list[str] | None, None, "--engine", help="vLLM base URL, probed directly (e.g. http://10.0.0.5:8000); repeat it for a fleet of replicas (diagnose, watch).", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--gateway", help="What the application calls (nginx, FastAPI edge...).", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--route", help=f"{' | '.join(ROUTES)} (default {PLAN.route}).", rich_help_panel=TARGET_PANEL),
    opt(Path | None, None, "--payload", help="The application's own JSON request body; stream is forced on.", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--gateway-route", help="The application's own route on the gateway path, e.g. 'POST /chat?prompt={prompt}' ({prompt}, {max_tokens} filled in).", rich_help_panel=TARGET_PANEL),
    opt(Path | None, None, "--gateway-payload", help="Body template for --gateway-route (JSON or raw text, same placeholders).", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--framing", help=f"Force the stream framing: {' | '.join(FRAMINGS)} (default: detected).", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--text-field", help="Where NDJSON / named-event JSON keeps its text, a dotted path (default: found).", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--gateway-kind", help=f"What the gateway is ({', '.join(KINDS)}...), for remediations when its headers do not say.", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--model", help="Model id (default: the first id of /v1/models).", rich_help_panel=TARGET_PANEL),
    opt(int | None, None, "--prompt-tokens", help="Default prompt length in tokens (about).", rich_help_panel=TARGET_PANEL),
    opt(int | None, None, "--max-tokens", help="Output tokens asked for (a fixed length where the server honours it).", rich_help_panel=TARGET_PANEL),
    opt(int | None, None, "--concurrency", help=f"Streams in flight per path (default {shown(PLAN.concurrency)}).", rich_help_panel=TARGET_PANEL),
    opt(int | None, None, "--requests", help="Measured requests per path (default: until every path is clearly within or over budget, or --duration runs out).", rich_help_panel=TARGET_PANEL),
    opt(float | None, None, "--duration", help=f"Time budget in seconds of the measured phase when --requests is not given (default {shown(PLAN.duration_s)}).", rich_help_panel=TARGET_PANEL),
    opt(int | None, None, "--warmup", help=f"Warm-up requests per path, excluded from statistics (default {shown(PLAN.warmup)}).", rich_help_panel=TARGET_PANEL),
    opt(float | None, None, "--rate", help="Poisson arrivals per second instead of a closed loop.", rich_help_panel=TARGET_PANEL),
    opt(float | None, None, "--stall-timeout", help=f"Fail a request after this many seconds without a byte, or without its response head or next token while bytes trickle (default {shown(PLAN.stall_timeout_s)}).", rich_help_panel=TARGET_PANEL),
    opt(float | None, None, "--deadline", help=f"Overall probe deadline in seconds (default {shown(PLAN.deadline_s)}).", rich_help_panel=TARGET_PANEL),
    opt(str | None, None, "--api-key-env", help=f"Environment variable holding the API key (default {API_KEY_ENV}).", rich_help_panel=TARGET_PANEL),
    opt(Path | None, None, "--api-key-file", help="File holding the API key.", rich_help_panel=TARGET_PANEL),
    opt(Path | None, None, "--ca-cert", help="CA bundle for TLS verification.", rich_help_panel=TARGET_PANEL),
    opt(bool, False, "--insecure", help="Do not verify TLS certificates.", rich_help_panel=TARGET_PANEL),
    opt(list[str] | None, None, "--header", help="Extra request header 'Name: value', or 'Name: @env:VAR' to read the value from the environment (repeatable; redacted in output).", rich_help_panel=TARGET_PANEL),
]
ENGINE_OPTIONS = [
    opt(str | None, None, "--log", help="vLLM log file ('-' = stdin, .gz accepted).", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--model-dir", help="The served model's directory (or its config.json): size its KV cache against the log's.", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--metrics-url", help="/metrics URL (default: engine URL + /metrics).", rich_help_panel=ENGINE_PANEL),
    opt(bool, False, "--no-metrics", help="Do not scrape /metrics.", rich_help_panel=ENGINE_PANEL),
    opt(float | None, None, "--scrape-interval", help=f"Seconds between /metrics scrapes during the probe (default {shown(PLAN.scrape_interval_s)}).", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--prometheus", help="Prometheus URL: read the incident window's history.", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--router", help="The router between the gateway and the replicas (vllm-router, sglang-router): read its worker list, its /metrics and each replica's; the gateway path when no --gateway is given.", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--router-metrics", help="The router's /metrics URL when not at --router + /metrics (vllm-router: its --prometheus-port).", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--router-args", help="The router's flags as deployed, quoted ('--policy cache_aware --max-concurrent-requests 64'): the settings its remediations quote.", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--router-log", help="The router's startup log: the settings it states (policy, queue, health-check interval).", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--since", help=f"History window for --prometheus (e.g. 15m, 2h; default {shown_duration(PLAN.since_s)}).", rich_help_panel=ENGINE_PANEL),
    opt(str, "", "--selector", help="Label selector for --prometheus, e.g. '{job=\"vllm\"}'.", rich_help_panel=ENGINE_PANEL),
    opt(bool, False, "--no-gpu", help="Skip NVML.", rich_help_panel=ENGINE_PANEL),
    opt(bool, False, "--no-host", help="Skip host facts (psutil).", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--otlp-listen", help="Receive the engine's and gateway's OpenTelemetry spans during the probe (OTLP/HTTP, POST /v1/traces) on HOST:PORT, e.g. 127.0.0.1:4318; point vLLM's --otlp-traces-endpoint at it.", rich_help_panel=ENGINE_PANEL),
    opt(str | None, None, "--traces", help="Read the probe's spans back after the probe from a trace store's query API by their trace ids: Jaeger (http://HOST:16686) or Grafana Tempo (http://HOST:3200); credentials as user:password@ in the URL or --traces-header.", rich_help_panel=ENGINE_PANEL),
    opt(list[str] | None, None, "--traces-header", help="A header for the --traces store, 'Name: value' or 'Name: @env:VAR' (repeatable; redacted in output), e.g. 'Authorization: @env:TEMPO_TOKEN' or 'X-Scope-OrgID: tenant'.", rich_help_panel=ENGINE_PANEL),
    opt(bool, False, "--no-trace-context", help="Send probe requests without a W3C traceparent header (for a gateway that rejects unknown headers).", rich_help_panel=ENGINE_PANEL),
]
RUN_OPTIONS = [
    opt(str | None, None, "--provider", help="Cloud or datacenter, for the run record.", rich_help_panel=RUN_PANEL),
    opt(str | None, None, "--region", help="Region (also selects per-region budgets).", rich_help_panel=RUN_PANEL),
    opt(str | None, None, "--client-location", help="Where the probe ran from.", rich_help_panel=RUN_PANEL),
]
ANALYSIS_OPTIONS = [
    opt(list[str] | None, None, "--select", help="Only these checks: codes, code prefixes or names (repeatable, or comma-separated).", rich_help_panel=ANALYSIS_PANEL),
    opt(list[str] | None, None, "--ignore", help="Skip these checks (as --select).", rich_help_panel=ANALYSIS_PANEL),
    opt(list[str] | None, None, "--set", help="Override a threshold: CHECK.OPTION=VALUE (repeatable).", rich_help_panel=ANALYSIS_PANEL),
    opt(str | None, None, "--fail-on", help=f"Exit 1 for: felt (latency users felt; risks alone exit 0) | info | warning | critical (any finding at or above it, risks included) (default {ANALYSIS.fail_on.value}).", rich_help_panel=ANALYSIS_PANEL),
    opt(float | None, None, "--ttft-budget", help=f"Time-to-first-token budget in seconds, under {shown(REFUSED_BUDGET_S['ttft'])}: 500 ms is 0.5, not 500 (default {shown(BUDGETS.ttft_s)}).", rich_help_panel=ANALYSIS_PANEL),
    opt(float | None, None, "--tpot-budget", help=f"Time-per-output-token budget in seconds, under {shown(REFUSED_BUDGET_S['tpot'])}: 50 ms is 0.05, not 50 (default {shown(BUDGETS.tpot_s)}).", rich_help_panel=ANALYSIS_PANEL),
    opt(Path | None, None, "--json", help="Write the JSON report to PATH (--format json prints it to stdout instead).", rich_help_panel=ANALYSIS_PANEL),
    opt(Path | None, None, "--html", help="Write the self-contained HTML report here.", rich_help_panel=ANALYSIS_PANEL),
    opt(Path | None, None, "--md", help="Write a short Markdown summary here.", rich_help_panel=ANALYSIS_PANEL),
    opt(str, FORMATS[0], "--format", help=f"What to print to stdout: {' | '.join(FORMATS)} (the whole JSON report).", rich_help_panel=ANALYSIS_PANEL),
    opt(bool, False, "--verbose", "-v", help="Also show the evidence values, every check's outcome, and the per-path, startup-log and metrics tables.", rich_help_panel=ANALYSIS_PANEL),
]
EXPORT_OPTIONS = [
    opt(Path | None, None, "--metrics-textfile", help="Also write the run's metrics (llm_doctor_*) here, atomically, for node_exporter's textfile collector (name it *.prom).", rich_help_panel=ANALYSIS_PANEL),
    opt(str | None, None, "--pushgateway", help="Also push the run's metrics to this Prometheus Pushgateway URL (job llm-doctor; llm-doctor-load for load, llm-doctor-sweep for sweep; grouped by region).", rich_help_panel=ANALYSIS_PANEL),
]
BASELINE_OPTION = [
    opt(Path | None, None, "--baseline", help="Keep the latest healthy run per region, provider, client location and request shape in this folder, and compare each run with its own, as compare does (exit 1 for a regression, 2 when too few requests to tell; thresholds from \\[compare] of the config file).", rich_help_panel=ANALYSIS_PANEL),
]
#: ``diagnose``, ``collect`` and each round of ``watch`` read their streams in one process unless told
#: otherwise (here, or ``[probe] client_workers`` in the config file).
CLIENT_WORKERS_OPTION = [
    opt(int | None, None, "--client-workers", help="Processes that read the streams, one event loop each, for hundreds of streams at once (default 1: one process; at most one per CPU helps).", rich_help_panel=TARGET_PANEL),
]
CONFIG_OPTION = [opt(Path | None, None, "--config", help="TOML config (default ./llm-doctor.toml when present).")]
LOAD_PANEL = "Load"
#: ``load`` and ``sweep`` take the probe's targets with lengths that may be ranges, and set the
#: concurrency themselves (the scenario, or each level of the sweep).
LOAD_TARGET_OPTIONS = [o for o in TARGET_OPTIONS if o.name not in ("prompt_tokens", "max_tokens", "concurrency")] + [
    opt(str | None, None, "--prompt-tokens", help="Prompt length in tokens (about): N, or LOW:HIGH drawn uniformly per request.", rich_help_panel=LOAD_PANEL),
    opt(str | None, None, "--max-tokens", help="Output tokens per request: N, or LOW:HIGH drawn uniformly per request.", rich_help_panel=LOAD_PANEL),
    opt(Path | None, None, "--shapes", help='Replay real request lengths: JSON Lines of {"prompt_tokens": N, "max_tokens": M}.', rich_help_panel=LOAD_PANEL),
    opt(int | None, None, "--max-concurrency", help="Never more streams than this in flight (default 256; a sweep's highest concurrency, default 64).", rich_help_panel=LOAD_PANEL),
    opt(int | None, None, "--client-workers", help="Processes that read the streams, one event loop each (default: one per 64 streams in flight, at most one per CPU; 1 = one process).", rich_help_panel=LOAD_PANEL),
    opt(float | None, None, "--gpu-hour-price", help="What one GPU hour costs: adds the cost per million output tokens.", rich_help_panel=LOAD_PANEL),
    opt(int | None, None, "--gpus", help="GPUs serving the target, for --gpu-hour-price (default 1).", rich_help_panel=LOAD_PANEL),
]
LOAD_ANALYSIS_OPTIONS = [o for o in ANALYSIS_OPTIONS if o.name != "md"]
#: ``verify``: the request shape, deadlines and credentials of ``diagnose`` (the stream probe and the
#: gate's requests both use them), the budgets a ``verify REPORT`` falls back on, and its outputs.
VERIFY_OPTIONS = [o for o in TARGET_OPTIONS if o.name in (
    "route", "model", "prompt_tokens", "max_tokens", "concurrency", "requests", "warmup", "stall_timeout", "deadline",
    "api_key_env", "api_key_file", "ca_cert", "insecure", "header")] + [
    o for o in ANALYSIS_OPTIONS if o.name in ("ttft_budget", "tpot_budget", "json", "html", "md", "format")]
