"""The incident's users: ``tests/support/loadgen.py`` as a process of its own, beside llm-doctor.

``user_load`` starts the load generator against a server, waits until the server itself shows
the load (its ``/metrics`` gauges, not a sleep), and stops the generator when the block ends
(SIGTERM, then SIGKILL), so no user outlives its test. ``felt`` turns the generator's JSONL
into the few numbers an assertion message or the findings notes quote.
"""

from __future__ import annotations

import contextlib
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.realvllm.server import BELOW_THE_PROBE
from tests.support.loadgen import read_records
from tests.support.served import stop_group, tail

ROOT = Path(__file__).resolve().parents[2]
LOAD_READY_TIMEOUT_S = 120.0


class LoadNotShown(RuntimeError):
    """The server never showed the incident's load: the incident did not begin."""


@dataclass(frozen=True)
class Load:
    """The users of one incident, as load-generator flags, and when the incident counts as started."""

    users: int
    prompt_tokens: int
    max_tokens: int
    also: tuple[str, ...] = ()  # more user classes, USERS:PROMPT_TOKENS:MAX_TOKENS[:LABEL]
    model: str = "tiny"  # what the users ask for: the served model, or one of its LoRA adapters
    # A bound only: the test stops the users as soon as llm-doctor is done. It outlasts two
    # diagnoses at their timeout (a frozen run is re-run), so no incident ends under the probe.
    duration_s: float = 1800.0
    ready: dict[str, float] = field(default_factory=dict)  # gauge -> the value it must reach first
    shared_prefix: int = 0  # tokens of one system prompt every user's prompt starts with
    whole: bool = False  # the users ask for whole answers (no stream)

    def args(self, url: str, out: Path) -> list[str]:
        also = [a for spec in self.also for a in ("--also", spec)]
        return ["--url", url, "--model", self.model, "--users", str(self.users), "--prompt-tokens", str(self.prompt_tokens),
                "--max-tokens", str(self.max_tokens), *also, "--duration", str(self.duration_s), "--out", str(out),
                *(["--shared-prefix", str(self.shared_prefix)] if self.shared_prefix else []), *(["--whole"] if self.whole else [])]


def gauges(url: str) -> dict[str, float]:
    """vLLM's gauges now, summed over engines (``vllm:num_requests_waiting`` ...)."""
    text = httpx.get(f"{url}/metrics", timeout=5.0).text
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        if family.type == "gauge":
            for sample in family.samples:
                out[sample.name] = out.get(sample.name, 0.0) + sample.value
    return out


@contextlib.contextmanager
def user_load(url: str, load: Load, out: Path, server_log: Path | None = None) -> Iterator[Path]:
    """Users streaming from ``url`` for the duration of the block; yields their JSONL file.

    When the server never shows the load, the error carries what the users got, the generator's
    stderr and the tail of ``server_log``: CI keeps only the test's output.
    """
    err_path = out.with_suffix(".stderr")
    with err_path.open("wb") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen([*BELOW_THE_PROBE, sys.executable, "-m", "tests.support.loadgen", *load.args(url, out)], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        try:
            _wait_ready(proc, url, load)
        except RuntimeError as exc:
            raise LoadNotShown(f"{exc}\n{_why_not_ready(out, err_path, server_log)}") from None
        yield out
        if proc.poll() is not None:  # the incident ended before llm-doctor did: its verdict would be of an idle server
            raise RuntimeError(f"the users stopped (exit {proc.returncode}) before the block ended: "
                               f"--duration {load.duration_s:g} s was shorter than llm-doctor's run")
    finally:
        stop_group(proc)  # started in a session of its own: the group is the generator


def _wait_ready(proc: subprocess.Popen[bytes], url: str, load: Load) -> None:
    deadline = time.monotonic() + LOAD_READY_TIMEOUT_S
    seen: dict[str, float] = {}  # the highest value each gauge reached
    failed: httpx.HTTPError | None = None  # the last read of /metrics that failed
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the load generator exited with {proc.returncode} before the incident began")
        try:
            now = gauges(url)
        except httpx.HTTPError as exc:
            failed = exc
        else:
            for name in load.ready:
                seen[name] = max(seen.get(name, 0.0), now.get(name, 0.0))
            if all(now.get(name, 0.0) >= value for name, value in load.ready.items()):
                return
        time.sleep(0.5)
    raise RuntimeError(f"the server never showed {load.ready} within {LOAD_READY_TIMEOUT_S:g} s (highest seen: {seen}; "
                       f"last failed read of /metrics: {failed!r})")


def _why_not_ready(out: Path, err: Path, server_log: Path | None) -> str:
    """What the users got (their timings and first errors), the generator's stderr, the server's log tail."""
    try:
        records = read_records(out)
        users = f"users felt: {felt(out)}\ntheir first errors: {sorted({r['error'] for r in records if r['error']})[:3]}"
    except ValueError as exc:  # a line the generator was writing when it was read: the rest still says why
        users = f"the users' records could not be read ({exc})"
    lines = [users, f"load generator stderr: {tail(err, 2000)}"]
    if server_log is not None:  # without the scrapes' access lines (Prometheus's, and ours), which say nothing
        said = [line for line in tail(server_log, 40000).splitlines() if '"GET /metrics' not in line]
        lines.append("server log tail:\n" + "\n".join(said)[-4000:])
    return "\n".join(lines)


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def felt(jsonl: Path) -> dict[str, Any]:
    """What the load generator's users felt, per user class: n, stopped, errors, TTFT, TPOT and largest-gap quantiles."""
    out: dict[str, Any] = {}
    records = read_records(jsonl)
    for label in sorted({r["label"] for r in records}):
        mine = [r for r in records if r["label"] == label]
        stopped = [r for r in mine if (r["error"] or "").startswith("stopped")]  # cut short by the test's end
        ok = [r for r in mine if r["error"] is None and r["ttft_s"] is not None]
        ttft = [r["ttft_s"] for r in ok]
        gaps = [r["max_gap_s"] for r in ok if r["max_gap_s"] is not None]
        tpot = [(r["e2e_s"] - r["ttft_s"]) / (r["events"] - 1) for r in ok if r["events"] > 1]
        prompts = [r["prompt_tokens"] for r in ok if r["prompt_tokens"]]
        out[label] = {
            "n": len(mine), "stopped": len(stopped), "errors": len(mine) - len(ok) - len(stopped),
            "prompt_tokens": statistics.median(prompts) if prompts else None,
            "ttft_p50_s": _p(ttft, 0.5), "ttft_max_s": max(ttft, default=None),
            "tpot_p50_s": _p(tpot, 0.5), "tpot_max_s": max(tpot, default=None),
            "max_gap_p50_s": _p(gaps, 0.5), "max_gap_max_s": max(gaps, default=None),
            "gaps_over_1s": sum(len(r["gaps_over_1s"]) for r in ok),
        }
    return out
