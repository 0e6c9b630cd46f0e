"""Named lab scenarios and ``start_lab``: an engine and a gateway on free ports, set up so that
one known cause of latency arises from the scheduler model or the gateway mode.

Each scenario carries the probe shape that shows its symptom, the background load the lab
generates while the probe runs, and the verdict a correct diagnosis reaches (symptom and the
setting of the primary remediation). Step costs are scaled so a scenario's probe takes seconds:
one decode step is ~10-25 ms, as on a GPU serving an 8B-70B model, but answers are short.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.lab.engine import BackgroundLoad
from doctor.lab.gateway import GatewayConfig
from doctor.lab.scheduler import EngineConfig
from doctor.lab.servers import servers_spec, start_servers, stop_servers

CHILD_START_TIMEOUT_S = 30.0
CHILD_STOP_TIMEOUT_S = 1.0


@dataclass(frozen=True)
class ProbePlan:
    """The probe shape that shows the scenario's symptom (``llm-doctor probe`` options)."""

    route: str = "chat"  # completions | chat | responses
    concurrency: int = 4
    requests: int = 8  # per path
    warmup: int = 1
    prompt_tokens: int = 128
    max_tokens: int = 64
    shared_prefix_tokens: int = 0  # a long system prompt every request shares (prefix caching)
    extra: dict[str, Any] = field(default_factory=dict)  # merged into the request body

    def payload(self, nonce: int = 0) -> dict[str, Any]:
        """A request body of about ``prompt_tokens`` lab tokens (``--payload`` for the probe)."""
        prefix = " ".join(["policy"] * self.shared_prefix_tokens)
        words = " ".join(["word"] * max(self.prompt_tokens - self.shared_prefix_tokens - 3, 1))
        text = f"{prefix} Request {nonce} {words}".strip()
        if self.route == "responses":
            body: dict[str, Any] = {"input": text, "max_output_tokens": self.max_tokens}
        elif self.route == "completions":
            body = {"prompt": text, "max_tokens": self.max_tokens}
        else:
            body = {"messages": [{"role": "user", "content": text}], "max_tokens": self.max_tokens}
        return {**body, "stream": True, **self.extra}


@dataclass(frozen=True)
class Expectation:
    """What a correct diagnosis says about the scenario."""

    symptom: str  # pre-first-token | inter-token | proxy-only | healthy
    setting: str | None  # verdict.primary_remediation.setting; None when healthy
    finding: str | None = None  # the finding that explains it, by name


@dataclass(frozen=True)
class Scenario:
    """One named lab setup: the engine and gateway that produce a known cause, the probe that shows
    its symptom, the load beside it, and the verdict a correct diagnosis reaches (``demo``, the tests).
    """

    name: str
    description: str
    engine: EngineConfig
    gateway: GatewayConfig
    probe: ProbePlan
    expect: Expectation
    background: BackgroundLoad | None = None


def _scenarios() -> dict[str, Scenario]:
    base = EngineConfig()
    items = [
        Scenario(
            "healthy",
            "A well-sized engine behind a pass-through gateway: tokens flow within budget on both paths.",
            base,
            GatewayConfig("pass"),
            ProbePlan(concurrency=4, requests=8, prompt_tokens=256, max_tokens=64),
            Expectation("healthy", None),
        ),
        Scenario(
            "queueing",
            "max_num_seqs=2 under 8 concurrent streams: requests wait for a slot, first tokens come in pairs.",
            dataclasses.replace(base, max_num_seqs=2),
            GatewayConfig("pass"),
            ProbePlan(concurrency=8, requests=12, prompt_tokens=128, max_tokens=32),
            Expectation("pre-first-token", "max_num_seqs", "requests-queued-before-prefill"),
        ),
        Scenario(
            "kv-pressure",
            "A KV cache of 512 tokens for 12 streams growing to ~130 tokens each: running sequences "
            "are preempted by recompute and stall for seconds inside their streams.",
            dataclasses.replace(
                base,
                max_model_len=512,
                kv_cache_tokens=512,
                step_base_s=0.020,
                decode_s_per_seq=0.001,
            ),
            GatewayConfig("pass"),
            ProbePlan(concurrency=6, requests=6, warmup=0, prompt_tokens=16, max_tokens=112),
            Expectation("inter-token", "gpu_memory_utilization", "kv-pressure-preemption"),
        ),
        Scenario(
            "prefill-interference",
            "6,000-token prompts from other users arrive while 4 streams decode; with "
            "max_num_batched_tokens=8192 each prompt is prefilled in one step and freezes them all.",
            dataclasses.replace(
                base,
                max_num_batched_tokens=8192,
                prefill_s_per_token=0.0002,
                step_base_s=0.020,
                decode_s_per_seq=0.001,
            ),
            GatewayConfig("pass"),
            ProbePlan(concurrency=4, requests=8, prompt_tokens=128, max_tokens=40),
            Expectation("inter-token", "max_num_batched_tokens", "prefill-interference"),
            BackgroundLoad(prompt_tokens=6000, max_tokens=1, interval_s=0.8),
        ),
        Scenario(
            "proxy-buffering",
            "The gateway holds the stream in 16 KiB buffers (nginx proxy_buffering on, proxy_buffer_size "
            "16k, close-delimited upstream): bursts of ~65 events, first token late, direct path fine.",
            base,
            GatewayConfig("buffer", buffer_size=16384),
            ProbePlan(concurrency=2, requests=8, prompt_tokens=128, max_tokens=128),
            Expectation("proxy-only", "proxy_buffering", "proxy-buffering"),
        ),
        Scenario(
            "stream-compression",
            "The gateway gzips text/event-stream and flushes only full buffers: a short answer "
            "arrives whole at the end.",
            base,
            GatewayConfig("compress", buffer_size=4096),
            ProbePlan(concurrency=2, requests=8, prompt_tokens=128, max_tokens=64),
            Expectation("proxy-only", "gzip", "stream-compression"),
        ),
        Scenario(
            "gateway-serialisation",
            "The gateway calls the engine with a blocking client inside its async handler: streams "
            "are relayed one at a time, so TTFT through it grows with concurrency.",
            base,
            GatewayConfig("serialise"),
            ProbePlan(concurrency=4, requests=8, prompt_tokens=128, max_tokens=32),
            Expectation("proxy-only", "gateway_streaming", "gateway-serialisation"),
        ),
    ]
    return {s.name: s for s in items}


SCENARIOS: dict[str, Scenario] = _scenarios()


def diagnose_flags(spec: Scenario, engine_url: str, gateway_url: str, workdir: Path) -> dict[str, Any]:
    """The ``diagnose`` flags, by option name, that show ``spec``'s symptom against its running lab: the
    URLs, the lab's log and its probe plan (route, concurrency, requests, warm-up, and the request body
    written to ``workdir/payload.json``). Without them the defaults (one stream at a time, a
    256-token prompt) read a queue as healthy; ``demo`` and ``python -m doctor.lab.serve`` both give them."""
    payload = workdir / "payload.json"
    payload.write_text(json.dumps(spec.probe.payload()))
    plan = spec.probe
    return {"engine": engine_url, "gateway": gateway_url, "metrics_url": engine_url + "/metrics",
            "log": str(workdir / "vllm.log"), "route": plan.route, "payload": str(payload),
            "concurrency": plan.concurrency, "requests": plan.requests, "warmup": plan.warmup}


def as_arguments(flags: dict[str, Any]) -> list[str]:
    """``diagnose_flags`` as a command line's arguments: ``--metrics-url URL``; True is the bare flag."""
    out: list[str] = []
    for key, value in flags.items():
        out += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    return out
#: What `llm-doctor demo` shows by default: the case only a client-side, two-path probe can see
#: (the engine is healthy, the gateway is not), with one unambiguous directive to change.
DEFAULT_SCENARIO = "proxy-buffering"


def get_scenario(name: str) -> Scenario:
    try:
        return SCENARIOS[name]
    except KeyError:
        raise KeyError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}") from None


@dataclass
class Lab:
    """A running lab; use through ``start_lab``."""

    scenario: Scenario
    engine_url: str
    gateway_url: str
    log_path: Path
    _stop: Callable[[], None] = field(repr=False)

    @property
    def metrics_url(self) -> str:
        return self.engine_url + "/metrics"

    def close(self) -> None:
        self._stop()


@contextmanager
def start_lab(scenario: str | Scenario, workdir: str | os.PathLike[str], *, isolate: bool = True) -> Iterator[Lab]:
    """Start the scenario's engine (log in ``workdir/vllm.log``) and gateway; stop both on exit.

    ``isolate`` (the default) runs them in a child process, so that the lab's work never shows up
    as event-loop lag in a probe running in this process; ``isolate=False`` runs them in threads
    here (faster to start, for tests that look inside).
    """
    spec = get_scenario(scenario) if isinstance(scenario, str) else scenario
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    starter = _start_child if isolate else _start_threads
    engine_url, gateway_url, stop = starter(spec, workdir)
    lab = Lab(spec, engine_url, gateway_url, workdir / "vllm.log", stop)
    try:
        yield lab
    finally:
        lab.close()


def _start_threads(spec: Scenario, workdir: Path) -> tuple[str, str, Callable[[], None]]:
    engine, gateway = start_servers(json.loads(servers_spec(spec.engine, spec.gateway, spec.background)), workdir)
    return engine.url, gateway.url, lambda: stop_servers(engine, gateway)


def _start_child(spec: Scenario, workdir: Path) -> tuple[str, str, Callable[[], None]]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])  # so the child imports this very package
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with (workdir / "lab-stderr.log").open("wb") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "doctor.lab.serve",
                servers_spec(spec.engine, spec.gateway, spec.background),
                str(workdir),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )

    def stop() -> None:
        assert proc.stdin is not None
        proc.stdin.close()  # the child's signal to shut down
        try:
            proc.wait(timeout=CHILD_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], CHILD_START_TIMEOUT_S)
    line = proc.stdout.readline() if ready else b""
    if not line:
        stop()
        detail = (workdir / "lab-stderr.log").read_text(errors="replace")[-2000:]
        raise RuntimeError(f"the lab did not start within {CHILD_START_TIMEOUT_S:g} s: {detail or 'no output'}")
    urls = json.loads(line)
    return urls["engine"], urls["gateway"], stop
