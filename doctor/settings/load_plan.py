"""The plans of ``llm-doctor load`` and ``llm-doctor sweep``: the scenario over the probe plan.

A scenario is a probe shape in MLPerf's terms (``doctor.probes.plan.CollectConfig``):

- ``single``: one stream, closed loop, the next request when the previous one ends;
- ``server``: Poisson arrivals at ``--rate`` for ``--duration`` seconds, open loop (an arrival
  never waits for an answer; one the client could not send on time is counted late), never
  more than ``--max-concurrency`` in flight;
- ``offline``: ``--requests`` all at once (at most ``--max-concurrency`` in flight), throughput only.

Load runs drive one path: the gateway when both ``--engine`` and ``--gateway`` are given (what
users call; the engine is then read for its /metrics and /version), else the one given. They
never stop early on the adaptive rule: the scenario's duration or count decides.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from doctor.derive.load_summary import Price
from doctor.evidence import ProbePath
from doctor.foundation.errors import UsageError
from doctor.probes.lengths import Lengths, parse_range, read_shapes
from doctor.probes.plan import MAX_RATE, MAX_REQUESTS, MAX_STREAMS, CollectConfig
from doctor.settings.config_file import FileConfig
from doctor.settings.probe_plan import build_collect_config
from doctor.settings.values import PLAN, Flags, bounded

SCENARIOS = ("single", "server", "offline")
SWEEP_BY = ("concurrency", "rate")

#: Streams in flight a load run allows by default (``--max-concurrency``): about what one client
#: process keeps up with (``docs/benchmarks.md``: TTFT stamps stay within a few ms to 256); more
#: are read by several processes (``--client-workers``, ``doctor.probes.shard``).
MAX_CONCURRENCY = 256
#: Requests per sweep level by default: the fewest that give a p90 early-stopping bound (MLPerf).
LEVEL_REQUESTS = 64
#: ``offline`` without ``--requests``.
OFFLINE_REQUESTS = 64
#: Planned Poisson arrivals beyond rate x duration: the schedule must not run out before the
#: duration does (a Poisson count over a window varies by about its square root).
ARRIVAL_MARGIN = 4.0
#: Requests a closed loop may plan without ``--requests`` (its ``--duration`` stops it first):
#: more than a fast engine answers in 10 minutes, few enough to plan in a blink.
CLOSED_LOOP_CAP = 100_000


#: GPUs one run's price is for (``--gpus``).
MAX_GPUS = 100_000


def _given(opts: Flags, key: str, default: Any) -> Any:
    """The flag when given, else ``default``: an explicit 0 is checked, never replaced."""
    return default if opts.get(key) is None else opts[key]


@dataclass(frozen=True)
class SweepPlan:
    """What ``sweep`` varies and how far: ``by`` concurrency (1, 2, 4, ...) or rate, up to ``maximum``."""

    by: str = "concurrency"
    start: float = 1.0
    maximum: float = 64.0
    requests: int = LEVEL_REQUESTS  # per level (at least 4 per stream at high concurrency)


def _lengths(opts: Flags) -> tuple[Lengths | None, dict[str, Any]]:
    """The per-request lengths and ``opts`` with plain integer lengths for ``build_collect_config``."""
    out = dict(opts)
    try:
        prompt = parse_range(opts["prompt_tokens"], "--prompt-tokens") if opts.get("prompt_tokens") else None
        answer = parse_range(opts["max_tokens"], "--max-tokens") if opts.get("max_tokens") else None
        shapes = read_shapes(Path(opts["shapes"])) if opts.get("shapes") else ()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    out["prompt_tokens"] = prompt[0] if prompt else None
    out["max_tokens"] = answer[0] if answer else None
    if not (shapes or (prompt and prompt[1]) or (answer and answer[1])):
        return None, out
    if shapes and (prompt or answer):
        raise UsageError("--shapes replays real request lengths: give it without --prompt-tokens / --max-tokens")
    lengths = Lengths(prompt_tokens=prompt[0] if prompt else PLAN.prompt_tokens,
                      max_tokens=answer[0] if answer else PLAN.max_tokens,
                      prompt_high=prompt[1] if prompt else None, max_tokens_high=answer[1] if answer else None,
                      shapes=shapes, source=str(opts["shapes"]) if shapes else None)
    return lengths, out


def build_load_base(opts: Flags, cfg: FileConfig, command: str, in_flight: int | None, *, pending: bool = False) -> CollectConfig:
    """What a load run and a sweep's levels share, checked: the targets, the request lengths and
    ``--scenario``; a load run shapes it by its scenario (``build_load_config``), a sweep's levels
    by their concurrency or rate. ``in_flight`` is the ``--max-concurrency`` that caps the streams
    in flight (None: the default); a concurrency sweep gives None, its ``--max-concurrency`` being
    its highest level (``build_sweep_plan``). ``pending``: a ``k8s://`` engine is given, looked up
    later (``doctor.settings.lookup_targets``)."""
    lengths, plain = _lengths(opts)
    scenario = opts.get("scenario") or "single"
    if scenario not in SCENARIOS:
        raise UsageError(f"--scenario must be one of {', '.join(SCENARIOS)}, got {scenario!r}")
    config = build_collect_config(plain, cfg, command)
    if not config.targets() and not pending:
        raise UsageError(f"{command} needs a target: give --engine or --gateway")
    _in_flight_cap(in_flight)
    return dataclasses.replace(config, scenario=scenario, lengths=lengths, adaptive=False,
                               only_path=ProbePath.GATEWAY if config.gateway else ProbePath.DIRECT)


def _in_flight_cap(in_flight: int | None) -> int:
    """The streams a run may hold in flight: ``--max-concurrency`` (checked), else the default."""
    return int(bounded(MAX_CONCURRENCY if in_flight is None else in_flight, "--max-concurrency", minimum=1,
                       inclusive=True, maximum=MAX_STREAMS))


def build_load_config(opts: Flags, cfg: FileConfig, command: str, in_flight: int | None, *, pending: bool = False) -> CollectConfig:
    """The probe plan of a load run: ``build_load_base`` shaped by its ``--scenario``."""
    config = build_load_base(opts, cfg, command, in_flight, pending=pending)
    cap = _in_flight_cap(in_flight)
    if config.scenario == "single":
        return dataclasses.replace(config, concurrency=1, rate=None, request_cap=config.requests or CLOSED_LOOP_CAP)
    if config.scenario == "offline":
        n = config.requests or OFFLINE_REQUESTS
        return dataclasses.replace(config, concurrency=min(n, cap), rate=None, requests=n)
    if config.rate is None:
        raise UsageError("--scenario server needs --rate (Poisson arrivals per second)")
    planned = math.ceil(config.rate * config.duration_s + ARRIVAL_MARGIN * math.sqrt(config.rate * config.duration_s) + 1)
    return dataclasses.replace(config, concurrency=cap, request_cap=config.requests or planned)


def build_sweep_plan(opts: Flags, by: str, maximum: float | None, start: float | None) -> SweepPlan:
    """``--by``, ``--max-concurrency`` / ``--max-rate``, ``--start`` and per-level ``--requests``, checked."""
    if by not in SWEEP_BY:
        raise UsageError(f"--by must be one of {', '.join(SWEEP_BY)}, got {by!r}")
    if by == "rate" and maximum is None:
        raise UsageError("--by rate needs --max-rate (the highest Poisson rate to try)")
    top = float(bounded(maximum if maximum is not None else SweepPlan.maximum, "--max-rate" if by == "rate" else "--max-concurrency",
                        minimum=0 if by == "rate" else 1, inclusive=by != "rate", maximum=MAX_RATE if by == "rate" else MAX_STREAMS))
    first = float(bounded(start if start is not None else 1.0, "--start", minimum=0, inclusive=False))
    if by == "concurrency" and (top != int(top) or first != int(first)):
        raise UsageError("a concurrency sweep counts whole streams: --start and --max-concurrency must be whole numbers")
    if first > top:
        raise UsageError(f"--start {first:g} is above the sweep's maximum {top:g}")
    requests = int(bounded(_given(opts, "requests", LEVEL_REQUESTS), "--requests", minimum=1, inclusive=True, maximum=MAX_REQUESTS))
    return SweepPlan(by=by, start=first, maximum=top, requests=requests)


def level_config(base: CollectConfig, plan: SweepPlan, value: float, cap: int) -> CollectConfig:
    """One sweep level's probe plan: ``value`` streams closed loop, or ``value`` arrivals/s (at most ``cap`` in flight)."""
    if plan.by == "concurrency":  # the scenario names the sweep: a level is never compared with a load run
        c = int(value)
        return dataclasses.replace(base, scenario="sweep-concurrency", concurrency=c, rate=None, requests=max(plan.requests, 4 * c))
    return dataclasses.replace(base, scenario="sweep-rate", concurrency=cap, rate=value, requests=plan.requests)


def build_price(opts: Flags) -> Price | None:
    """``--gpu-hour-price`` (and ``--gpus``): what one hour of the serving GPUs costs."""
    if opts.get("gpu_hour_price") is None:
        if opts.get("gpus") is not None:
            raise UsageError("--gpus prices the run: give --gpu-hour-price too")
        return None
    gpus = int(bounded(_given(opts, "gpus", 1), "--gpus", minimum=1, inclusive=True, maximum=MAX_GPUS))
    return Price(float(bounded(opts["gpu_hour_price"], "--gpu-hour-price", minimum=0)), gpus)
