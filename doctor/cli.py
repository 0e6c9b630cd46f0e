"""The ``llm-doctor`` command line (typer): the table of commands and the options each takes.

Option groups shared by several commands are declared once (``doctor.commands.option_groups``)
and attached with ``uses(...)`` (``doctor.commands.options``); the ``log`` and ``metrics`` help
is built in ``doctor.commands.reader_help``. Defaults quoted in the help text are
read from the dataclasses through ``doctor.settings``, whose ``resolve`` turns each command's flags
(over the config file over those defaults) into the one ``RunSettings`` the command runs with.
Each command's body is a ``run`` in ``doctor.commands``, imported when that command runs; ``diagnose`` goes through ``doctor.runs.pipeline`` (collect -> bundle file ->
analyze), so every live run also exercises the offline path.
"""

import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from doctor import __version__
from doctor.commands.guard import run_guarded
from doctor.commands.option_groups import (
    ANALYSIS_OPTIONS,
    BASELINE_OPTION,
    CLIENT_WORKERS_OPTION,
    CONFIG_OPTION,
    ENGINE_OPTIONS,
    EXPORT_OPTIONS,
    LOAD_ANALYSIS_OPTIONS,
    LOAD_TARGET_OPTIONS,
    RUN_OPTIONS,
    TARGET_OPTIONS,
    TARGET_PANEL,
    VERIFY_OPTIONS,
)
from doctor.commands.options import quiet_switches, unwrapped_help, uses
from doctor.commands.reader_help import LOG_HELP, METRICS_HELP
from doctor.engines.names import ENGINE_LIST
from doctor.foundation.console import narrow_terminals_spelled
from doctor.foundation.signals import terminate_like_interrupt
from doctor.settings import PRACTICAL, resolve, shown
from doctor.settings.config_file import FileConfig

app = typer.Typer(
    name="llm-doctor",
    help="Where the latency of a self-hosted LLM stack (vLLM behind a streaming gateway) is created, "
    "why, and the one setting to change.",
    no_args_is_help=True,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)


@app.command()
@uses(TARGET_OPTIONS, CLIENT_WORKERS_OPTION, ENGINE_OPTIONS, RUN_OPTIONS, ANALYSIS_OPTIONS, EXPORT_OPTIONS, BASELINE_OPTION, CONFIG_OPTION)
def diagnose(
    bundle: Annotated[Path | None, typer.Option("--bundle", help="Also keep the evidence bundle here (.json or .json.gz).")] = None,
    opts: dict[str, Any] = {},  # noqa: B006 - filled by uses()
) -> None:
    """Probe, read the engine's evidence, and say where the latency is and what to change.

    [bold]Examples[/]

      llm-doctor diagnose --engine http://vllm:8000 --gateway https://llm.example.com --log vllm.log

      llm-doctor diagnose --gateway https://llm.example.com --route responses --payload app-request.json --html report.html

      llm-doctor diagnose --engine http://vllm:8000 --region eu-west --metrics-textfile /var/lib/node_exporter/textfile/llm_doctor.prom
    """
    from doctor.commands.diagnose import run

    run_guarded(lambda: run(resolve("diagnose", {**opts, "bundle": bundle})))


@app.command()
@uses(TARGET_OPTIONS, CLIENT_WORKERS_OPTION, ENGINE_OPTIONS, RUN_OPTIONS, ANALYSIS_OPTIONS, EXPORT_OPTIONS, BASELINE_OPTION, CONFIG_OPTION)
def watch(
    every: Annotated[str, typer.Option("--every", help="Start a round this often: seconds, or 30s, 5m, 1h.")] = "5m",
    count: Annotated[int | None, typer.Option("--count", help="Stop after N rounds (default: until SIGTERM).")] = None,
    listen: Annotated[str | None, typer.Option("--listen", help="Serve the latest round's metrics on HOST:PORT/metrics.")] = None,
    history: Annotated[Path | None, typer.Option("--history", help="Keep each round's JSON report (it embeds the bundle) in this folder.")] = None,
    keep: Annotated[int, typer.Option("--keep", help="Rounds kept in --history; older ones are deleted.")] = 100,
    retries: Annotated[int, typer.Option("--retries", help="Retries of a round whose target is down (1 s, then doubling, never past the next round's start) before it is reported as an outage.")] = 3,
    canary_engine: Annotated[str | None, typer.Option("--canary-engine", help="A canary vLLM probed in the same round as --engine and compared with it.", rich_help_panel=TARGET_PANEL)] = None,
    canary_gateway: Annotated[str | None, typer.Option("--canary-gateway", help="A canary gateway probed in the same round as --gateway and compared with it.", rich_help_panel=TARGET_PANEL)] = None,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Diagnose every --every, serve the latest round on /metrics, keep a history; SIGTERM ends after the round.

    Each round is a whole diagnose (its own warm-up); rounds never overlap. A target that is down is retried with backoff inside the period, then reported as the round's outage (exit 1, llm_doctor_up 0), not the end of the watch. --canary-engine probes a canary in the same round and compares it with the stable; --engine repeated watches a fleet. The exit code is the last round's.

    [bold]Examples[/]

      llm-doctor watch --engine http://vllm:8000 --every 5m --listen 0.0.0.0:9464 --history /var/lib/llm-doctor

      llm-doctor watch --engine http://vllm:8000 --canary-engine http://vllm-canary:8000 --every 5m --baseline /var/lib/llm-doctor/baselines
    """
    from doctor.commands.watch import run

    repeat = {"every": every, "count": count, "listen": listen, "history": history, "keep": keep, "retries": retries,
              "canary_engine": canary_engine, "canary_gateway": canary_gateway}
    run_guarded(lambda: run(resolve("watch", {**opts, **repeat})))


@app.command("load")
@uses(LOAD_TARGET_OPTIONS, ENGINE_OPTIONS, RUN_OPTIONS, LOAD_ANALYSIS_OPTIONS, EXPORT_OPTIONS, CONFIG_OPTION)
def load_cmd(
    scenario: Annotated[str, typer.Option("--scenario", help="single (one stream, closed loop) | server (Poisson arrivals at --rate for --duration) | offline (--requests all at once).")] = "single",
    bundle: Annotated[Path | None, typer.Option("--bundle", help="Also keep the evidence bundle here (.json or .json.gz); `analyze` re-reads it as this run.")] = None,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Load the target in one of MLPerf's scenarios: latency percentiles, throughput, goodput, diagnosed.

    Open loop in the server scenario: arrivals never wait for answers, and an arrival the client could not send on time is counted late (its latency still counts from its schedule). The engine's /metrics is scraped over the run and every check runs on the result. Ctrl-C or SIGTERM stops sending at once and still writes the report.

    [bold]Examples[/]

      llm-doctor load --engine http://vllm:8000 --scenario server --rate 8 --duration 20 --html load.html

      llm-doctor load --gateway https://llm.example.com --scenario single --requests 64 --prompt-tokens 128:2048

      llm-doctor load --engine http://vllm:8000 --scenario offline --requests 256 --gpu-hour-price 2.5

      llm-doctor load --engine http://vllm:8000 --scenario server --rate 8 --duration 60 --metrics-textfile /var/lib/node_exporter/textfile/llm_doctor_load.prom
    """
    from doctor.commands.load import run

    run_guarded(lambda: run(resolve("load", {**opts, "scenario": scenario, "bundle": bundle})))


@app.command("sweep")
@uses(LOAD_TARGET_OPTIONS, ENGINE_OPTIONS, RUN_OPTIONS, LOAD_ANALYSIS_OPTIONS, EXPORT_OPTIONS, CONFIG_OPTION)
def sweep_cmd(
    by: Annotated[str, typer.Option("--by", help="concurrency (closed loop 1, 2, 4, ... to --max-concurrency) | rate (Poisson, to --max-rate).")] = "concurrency",
    max_rate: Annotated[float | None, typer.Option("--max-rate", help="The highest Poisson rate of a --by rate sweep.")] = None,
    start: Annotated[float | None, typer.Option("--start", help="The first level (default 1 stream, or 1 request/s).")] = None,
    bundle_dir: Annotated[Path | None, typer.Option("--bundle-dir", help="Keep each level's evidence bundle in this folder as level-<level>.json.gz; `analyze` re-reads any level offline.")] = None,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Find the SLO knee: the most load within --ttft-budget and --tpot-budget, why, and max_num_seqs.

    Levels double until one is over budget, then bisect between the last within and the first over; each level runs --requests (default 64, the fewest for a p90 early-stopping bound) and is diagnosed like a load run. The engine's /metrics at the first level over says why the knee is there; the recommendation is max_num_seqs at the knee, or replicas when the KV cache or compute runs out first. A level whose client was suspect is never the knee. --metrics-textfile and --pushgateway export the knee, the budget that binds and the setting (llm_doctor_sweep_*, job llm-doctor-sweep).

    [bold]Examples[/]

      llm-doctor sweep --engine http://vllm:8000 --log vllm.log --ttft-budget 0.5 --tpot-budget 0.05 --html sweep.html

      llm-doctor sweep --gateway https://llm.example.com --engine http://vllm:8000 --by rate --max-rate 32 --bundle-dir levels/

      llm-doctor analyze levels/level-8.json.gz
    """
    from doctor.commands.sweep import run

    run_guarded(lambda: run(resolve("sweep", {**opts, "by": by, "max_rate": max_rate, "start": start, "bundle_dir": bundle_dir})))


@app.command("collect")
@uses(TARGET_OPTIONS, CLIENT_WORKERS_OPTION, ENGINE_OPTIONS, RUN_OPTIONS, CONFIG_OPTION)
def collect_cmd(
    bundle: Annotated[Path, typer.Option("--bundle", "-o", help="Where to write the evidence bundle (.json or .json.gz).")] = Path("llm-doctor-bundle.json.gz"),
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Gather evidence into a bundle without analysing it (attach it, or `analyze` it later).

    [bold]Example[/]

      llm-doctor collect --engine http://vllm:8000 --log vllm.log -o incident-4711.json.gz
    """
    from doctor.commands.collect import run

    run_guarded(lambda: run(resolve("collect", {**opts, "bundle": bundle})))


@app.command("analyze")
@uses(ANALYSIS_OPTIONS, EXPORT_OPTIONS, CONFIG_OPTION)
def analyze_cmd(
    source: Annotated[Path, typer.Argument(help="A bundle (.json, .json.gz) or a report (.json, .html) that embeds one.")],
    region: Annotated[str | None, typer.Option("--region", help="Select per-region budgets from the config.")] = None,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Re-analyse saved evidence. Never touches the network.

    A report (or a bundle kept by diagnose) re-analyses with the budgets, thresholds and selection it was made with; flags and an explicit --config change them. Its exit code follows --fail-on (default felt), not the one it was made with.

    [bold]Examples[/]

      llm-doctor analyze incident-4711.json.gz --html report.html

      llm-doctor analyze report.html --set LD201.kv_full=0.9
    """
    from doctor.commands.analyze import run

    run_guarded(lambda: run(resolve("analyze", {**opts, "region": region}), source))


@app.command("compare")
def compare_cmd(
    base: Annotated[Path, typer.Argument(help="The earlier run: a bundle, or a JSON or HTML report (it embeds one).")],
    current: Annotated[Path, typer.Argument(help="The run to judge against it, in any of the same forms.")],
    allow_unlike: Annotated[bool, typer.Option("--allow-unlike", help="Compare even when the run records differ (the differences are still printed).")] = False,
    min_change: Annotated[float | None, typer.Option("--min-change", help=f"A regression shifts the typical request by more than this fraction of the base run's median (default {shown(PRACTICAL.relative)}; config: \\[compare] min_change).")] = None,
    min_ttft_change: Annotated[float | None, typer.Option("--min-ttft-change", help=f"The absolute part of that threshold for TTFT and E2E, in seconds: a regression also shifts them by more than this (default {shown(PRACTICAL.ttft_s)}; config: \\[compare] min_ttft_change).")] = None,
    min_tpot_change: Annotated[float | None, typer.Option("--min-tpot-change", help=f"The same for TPOT and ITL, in seconds (default {shown(PRACTICAL.tpot_s)}; config: \\[compare] min_tpot_change).")] = None,
    config: Annotated[Path | None, typer.Option("--config", help="TOML config (default ./llm-doctor.toml when present).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON to stdout (a switch, not a path); the exit codes are the same.")] = False,
) -> None:
    """Compare two runs: refuse unlike ones (exit 2), flag a latency regression (exit 1), say when the runs are too small to tell (exit 2).

    Runs must agree on model, revision, engine version and config, route, request shape, concurrency, scenario, provider, region and client location. Like runs get TTFT, TPOT, ITL and E2E p50/p90 per path side by side. A difference is a regression when it is beyond noise (a Mann-Whitney U test over the per-request samples, exact for small runs) and the typical request moved by more than both the relative and the absolute threshold. A shift that large which the samples cannot tell from noise is undecided: the message says about how many requests per run would decide it.

    [bold]Examples[/]

      llm-doctor compare yesterday.json today.json

      llm-doctor compare before.html after.json.gz --allow-unlike

      llm-doctor compare yesterday.json today.json --json --min-change 0.2
    """
    from doctor.commands.compare import run

    flags = {"config": config, "min_change": min_change, "min_ttft_change": min_ttft_change, "min_tpot_change": min_tpot_change}
    run_guarded(lambda: run(resolve("compare", flags), base, current, allow_unlike=allow_unlike, as_json=as_json))


@app.command("verify")
@uses(VERIFY_OPTIONS, CONFIG_OPTION)
def verify_cmd(
    report: Annotated[Path | None, typer.Argument(help="The incident's report or bundle: re-probe the candidate with its request shape and budgets and say whether its symptom is gone.")] = None,
    baseline: Annotated[str | None, typer.Option("--baseline", help="The stable endpoint (base URL) the candidate is compared with.", rich_help_panel=TARGET_PANEL)] = None,
    candidate: Annotated[str | None, typer.Option("--candidate", help="The changed endpoint (base URL): the canary, or the stack after the change.", rich_help_panel=TARGET_PANEL)] = None,
    prompts: Annotated[Path | None, typer.Option("--prompts", help="The answers gate's prompts, one request body per line (JSONL; chat 'messages' or completion 'prompt'); default: the built-in set of 18.")] = None,
    baseline_answers: Annotated[Path | None, typer.Option("--baseline-answers", help="Answers recorded earlier with --save-answers, instead of a live --baseline.")] = None,
    save_answers: Annotated[Path | None, typer.Option("--save-answers", help="Record the baseline's answers (or the one endpoint's, without --baseline) here, for a later --baseline-answers.")] = None,
    repeats: Annotated[int, typer.Option("--repeats", help="Times each prompt is asked of the baseline: the differences between them are the noise floor.")] = 3,
    no_answers: Annotated[bool, typer.Option("--no-answers", help="Skip the answers gate (latency only).")] = False,
    no_latency: Annotated[bool, typer.Option("--no-latency", help="Skip the latency half (answers only).")] = False,
    long_context: Annotated[bool, typer.Option("--long-context", help="Add the needle-in-a-haystack probe at the deployment's max_model_len: what a KV-cache precision change (kv_cache_dtype fp8) loses, which the per-token KL misses.")] = False,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="The context length of --long-context (default: the max_model_len /v1/models gives, as vLLM does).")] = None,
    opts: dict[str, Any] = {},  # noqa: B006
) -> None:
    """Whether a change kept the answers and fixed what users felt: a verdict per half, PASS / FAIL / ABSTAIN, each with its reasons.

    Answers: the prompts at temperature 0 with a fixed seed, the baseline asked --repeats times for its own noise floor, structural checks (empty or self-repeating answers, the share cut by length, JSON, tool calls), and where the engine scores prompts (vLLM's prompt_logprobs) the baseline's answers scored by both, compared per token against the floor. Latency: both endpoints probed at once, paired and interleaved at the same shape and concurrency, TTFT and TPOT judged as compare judges them. --long-context: needles in a haystack at max_model_len, for a KV-cache precision change. Exit 0 when every half passes, 1 when one fails, 2 when one cannot tell. Never "safe to ship": a canary's evidence.

    [bold]Examples[/]

      llm-doctor verify --baseline http://vllm-stable:8000 --candidate http://vllm-fp8:8000

      llm-doctor verify incident.json --candidate http://vllm:8000 --baseline-answers stable-answers.jsonl

      llm-doctor verify --candidate http://vllm-stable:8000 --save-answers stable-answers.jsonl
    """
    from doctor.commands.verify import run

    def go() -> int:
        settings = resolve("verify", {**opts, "baseline": baseline, "candidate": candidate, "baseline_answers": baseline_answers})
        return run(settings, report=report, prompts_file=prompts, baseline_answers=baseline_answers, save_answers=save_answers,
                   repeats=repeats, answers=not no_answers, latency=not no_latency, long_context=long_context,
                   max_model_len=max_model_len)

    run_guarded(go)


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
    from doctor.commands.probe import run

    run_guarded(lambda: run(resolve("probe", {**opts, "bundle": bundle}), as_json))


@app.command("log", help=LOG_HELP)
def log_cmd(
    source: Annotated[str, typer.Argument(help=f"Engine log file: {ENGINE_LIST} ('-' = stdin, .gz accepted).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON to stdout (a switch, not a path).")] = False,
) -> None:
    """Read an engine's log (``LOG_HELP``)."""
    from doctor.commands.log import run

    run_guarded(lambda: run(source, as_json))


@app.command("metrics", help=METRICS_HELP)
def metrics_cmd(
    sources: Annotated[list[str], typer.Argument(help="Saved /metrics scrapes (curl http://engine/metrics > a.prom), in the order taken.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the facts as JSON to stdout (a switch, not a path).")] = False,
) -> None:
    """Read saved /metrics scrapes (``METRICS_HELP``)."""
    from doctor.commands.metrics import run

    run_guarded(lambda: run(sources, as_json))


@app.command("scaling")
def scaling_cmd(
    paths: Annotated[list[str], typer.Argument(help="Files or folders of autoscaler objects as `kubectl get ... -o yaml` (or -o json) prints them; - reads stdin.")],
    json_out: Annotated[str | None, typer.Option("--json", help="Write the findings as JSON to this file (- for stdout).")] = None,
    log: Annotated[str | None, typer.Option("--log", help="The engine's startup log: its batch limit and its start-up time for the rules.")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Also each remediation's verify step and every object skipped.")] = False,
) -> None:
    """Judge autoscalers (HPA, KEDA, Knative, KServe, AIBrix, Ray Serve) as a careful reader would: signal, floor, targets, windows, status.

    Exit 1 for a finding at warning or above, 0 for none, 2 when nothing could be read.

    [bold]Examples[/]

      kubectl get hpa,scaledobject -n serving -o yaml | llm-doctor scaling -

      llm-doctor scaling deploy/ --log vllm.log --json scaling.json
    """
    from doctor.commands.scaling import run

    run_guarded(lambda: run(paths, json_out, log, verbose))


@app.command("size")
def size_cmd(
    model: Annotated[str, typer.Argument(help="A local model directory with config.json, or the config file (never a download).")],
    dtype: Annotated[str | None, typer.Option("--dtype", help="Model dtype (auto, bfloat16, float16, float32), or fp8 | int8 | int4 to quantise the linear layers.")] = None,
    kv_cache_dtype: Annotated[str, typer.Option("--kv-cache-dtype", help="auto (the model's dtype) or fp8.")] = "auto",
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel ranks.")] = 1,
    gpu: Annotated[str | None, typer.Option("--gpu", help="A card from the built-in table: H100-80GB, A100-80GB, A100-40GB, L40S, A10G, L4, ...")] = None,
    gpu_memory: Annotated[str | None, typer.Option("--gpu-memory", help="Memory of another card, e.g. 24GiB.")] = None,
    gpu_memory_utilization: Annotated[float | None, typer.Option("--gpu-memory-utilization", help="Share of the card vLLM may take (default 0.9).")] = None,
    kv_cache_memory: Annotated[str | None, typer.Option("--kv-cache-memory", help="KV cache bytes per GPU as vLLM's --kv-cache-memory-bytes takes them (1G = 2**30).")] = None,
    block_size: Annotated[int | None, typer.Option("--block-size", help="Tokens per KV block (default vLLM's: 16 on CUDA, 64 for MLA, 128 on CPU).")] = None,
    max_model_len: Annotated[int | None, typer.Option("--max-model-len", help="Tokens per request for the concurrency (default the config's max_position_embeddings).")] = None,
    max_num_batched_tokens: Annotated[int | None, typer.Option("--max-num-batched-tokens", help="Scheduler step size; sliding-window layers keep window + one step (default 2048).")] = None,
    avg_tokens: Annotated[int | None, typer.Option("--avg-tokens", help="Average tokens per sequence: the largest max_num_seqs whose sequences all fit.")] = None,
    device: Annotated[str, typer.Option("--device", help="cuda | cpu (the block size default).")] = "cuda",
    log: Annotated[str | None, typer.Option("--log", help="A vLLM log: size under its setup and budget and compare with the KV cache it reports (exit 1 when they differ).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON to stdout (a switch, not a path).")] = False,
) -> None:
    """Size a model from its config: parameters, weight bytes, KV bytes per token, and the KV cache a budget gives.

    [bold]Examples[/]

      llm-doctor size ./Llama-3-8B --gpu L4 --max-model-len 8192 --avg-tokens 2000

      llm-doctor size ./tiny --kv-cache-memory 1GiB --max-model-len 8192 --json

      llm-doctor size ./Llama-3-70B --log vllm.log
    """
    from doctor.commands.size import SizeRequest, run, setup

    run_guarded(lambda: run(SizeRequest(
        model, setup(dtype=dtype, kv_cache_dtype=kv_cache_dtype, tp=tp, block_size=block_size, device=device, max_model_len=max_model_len,
                     max_num_batched_tokens=max_num_batched_tokens),
        gpu=gpu, gpu_memory=gpu_memory, gpu_memory_utilization=gpu_memory_utilization, kv_cache_memory=kv_cache_memory,
        avg_tokens=avg_tokens, log=log, as_json=as_json)))


@app.command("checks")
def checks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Print the catalogue as JSON to stdout (a switch, not a path).")] = False,
) -> None:
    """List every check: code, name, symptom class, evidence it needs, options.

    [bold]Example[/]

      llm-doctor checks
    """
    from doctor.commands.catalogue import list_checks

    run_guarded(lambda: list_checks(as_json))


@app.command("explain")
def explain_cmd(
    check: Annotated[str, typer.Argument(help="A check code (LD101) or name.")],
) -> None:
    """Print a check's documentation: what it detects, why it matters, evidence, remediation, example.

    [bold]Example[/]

      llm-doctor explain LD101
    """
    from doctor.commands.catalogue import explain

    run_guarded(lambda: explain(check))


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
    from doctor.commands.demo import run  # the one way into the lab (tests/project/test_layering.py)

    # the lab is the demo's whole world: no config file changes it (an empty one, not ./llm-doctor.toml)
    run_guarded(lambda: run(resolve("demo", opts, FileConfig()), scenario, out_dir, list_only=list_scenarios))


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"llm-doctor {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def root(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")] = False,
) -> None:
    """llm-doctor: incidents, scheduled health checks, ticket-ready reports."""


quiet_switches()
unwrapped_help(app)


def main() -> None:
    terminate_like_interrupt()
    narrow_terminals_spelled()
    app()
