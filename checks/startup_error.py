"""The engine failed to start (or ran out of memory).

What it detects:
The startup log holds a failure vLLM stops on: no memory left for KV cache blocks
(`# GPU blocks: 0`, "No available memory for the cache blocks"), a `max_model_len` larger than
the KV cache can hold for one request, free GPU memory below the requested
`gpu_memory_utilization`, a CUDA out-of-memory error, or another error during the last startup.

Why it matters:
Nothing else in the report matters while the engine is down or restarting in a loop; and each
of these failures has one precise fix that the error message only half states.

Evidence:
Startup log: the error's kind, line number and text (`log_facts.errors`), which startup it
belongs to, and the facts the fix is computed from: `gpu_memory_utilization`, `max_model_len`,
the estimated maximum model length vLLM prints, free / total memory in the message.

Remediation:
no-cache-memory: raise `gpu_memory_utilization` (CPU backend: `VLLM_CPU_KVCACHE_SPACE`), or
shrink the model's footprint. max-len-exceeds-kv: `max_model_len` to the length vLLM estimates
fits (or raise `gpu_memory_utilization`). memory-below-utilisation: `gpu_memory_utilization`
just below the free share of the device (or free the memory other processes hold). oom: lower
`gpu_memory_utilization` to leave room for activations and CUDA graphs. other: the line itself.

Options:
step: how far the suggested gpu_memory_utilization moves
margin: kept below the free share for memory-below-utilisation

Example:
LD403 startup-error: startup failed (log line 75, max-len-exceeds-kv): max_model_len 8,192 needs
0.02 GiB of KV cache, 0.01 GiB available; vLLM estimates 3,968 fits -> max_model_len 3968.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import capped_utilization, engine_flag, engine_setting, rerun
from doctor.derive.engine import UNIDENTIFIED, EngineIdentity
from doctor.derive.log_facts import LogFacts, StartupError
from doctor.engines.names import VLLM, display, engine_part
from doctor.evidence import RunRecord
from doctor.model import Cause, EvidenceValue, Remediation, Severity, SymptomClass

#: Kinds that stop an engine whenever they appear; ``other`` counts only inside the last startup.
FATAL_KINDS = ("no-cache-memory", "max-len-exceeds-kv", "memory-below-utilisation", "oom")
DEFAULT_UTILISATION = 0.9  # vLLM's default gpu_memory_utilization
_FREE_RE = re.compile(r"Free memory on device \(([\d.]+)/([\d.]+) GiB\)")
_STORED_RE = re.compile(r"stored in KV cache \((\d+)\)")  # V0 wording
_ESTIMATE_RE = re.compile(r"estimated maximum model length is (\d+)")


def current_error(log_facts: LogFacts) -> StartupError | None:
    """The error that explains the engine's state: the last one of the last startup."""
    last = log_facts.startups[-1] if log_facts.startups else None
    in_last = [
        e
        for e in log_facts.errors
        if last is None
        or e.line is None
        or (e.line >= last.first_line and (last.last_line is None or e.line <= last.last_line))
    ]
    fatal = [e for e in in_last if e.kind in FATAL_KINDS]
    if fatal:
        return fatal[-1]
    started = log_facts.value("kv_cache_tokens") is not None or bool(log_facts.value("num_gpu_blocks"))
    others = [e for e in in_last if e.kind == "other"]
    return others[-1] if others and not started else None


@dataclass
class _Context:
    """What every fix is computed from."""

    err: StartupError
    text: str  # the error's message and raw line, where the numbers are
    log_facts: LogFacts
    engine: str  # the ``engine`` view's id
    run: RunRecord | None
    utilisation: float
    utilisation_current: str | None  # None: another engine's, whose default is not vLLM's
    step: float
    margin: float


@dataclass
class _Fix:
    setting: str
    suggested: str
    why: str
    current: str | None = None
    where: str | None = None  # an engine flag when None
    evidence: list[EvidenceValue] = field(default_factory=list)


def _no_cache_memory(ctx: _Context) -> _Fix:
    why = (
        "The weights and activations leave no memory for KV cache blocks. Give the cache more memory, "
        "or shrink the model's footprint (quantization, a larger tensor_parallel_size)."
    )
    if "VLLM_CPU_KVCACHE_SPACE" in ctx.text or ctx.log_facts.value("kv_cache_device") == "CPU":
        return _Fix(
            "VLLM_CPU_KVCACHE_SPACE",
            "raise (GiB of RAM for the KV cache)",
            why,
            where="environment of vllm serve",
        )
    return _Fix(
        "gpu_memory_utilization",
        f"{capped_utilization(ctx.utilisation + ctx.step):.2f}",
        why,
        current=ctx.utilisation_current,
    )


def _max_len_exceeds_kv(ctx: _Context) -> _Fix:
    mml = engine_setting("max_model_len", ctx.log_facts, ctx.run)
    est = engine_setting("estimated_max_model_len", ctx.log_facts, ctx.run)
    match = _ESTIMATE_RE.search(ctx.text) or _STORED_RE.search(ctx.text)
    fits = int(est.value) if est is not None else None
    if fits is None and match:
        fits = int(match.group(1))
    fix = _Fix(
        "max_model_len",
        str(fits) if fits else "lower it to what the KV cache holds",
        f"One request of max_model_len needs more KV cache than the engine has, so {_name(ctx)} refuses to "
        "start. Serve a shorter context, or raise gpu_memory_utilization to grow the cache.",
        current=str(mml.value) if mml is not None else None,
    )
    if fits:
        fix.evidence.append(
            EvidenceValue(
                f"max_model_len that fits ({_name(ctx)}'s estimate)", fits, "tokens", f"log line {ctx.err.line}"
            )
        )
    return fix


def _memory_below_utilisation(ctx: _Context) -> _Fix:
    fix = _Fix(
        "gpu_memory_utilization",
        "below the free share of the device",
        f"Other processes hold GPU memory, so the share {_name(ctx)} was asked to take is not free. Lower "
        "gpu_memory_utilization below the free share, or stop what else runs on the GPU.",
        current=ctx.utilisation_current,
    )
    match = _FREE_RE.search(ctx.text)
    if match:
        free, total = float(match.group(1)), float(match.group(2))
        fix.suggested = f"{math.floor((free / total - ctx.margin) * 100) / 100:.2f}"
        fix.evidence.append(
            EvidenceValue(
                "free / total GPU memory at startup", f"{free}/{total}", "GiB", f"log line {ctx.err.line}"
            )
        )
    return fix


def _oom(ctx: _Context) -> _Fix:
    return _Fix(
        "gpu_memory_utilization",
        f"{max(0.5, ctx.utilisation - ctx.step):.2f}" if ctx.utilisation_current else f"lower it by {ctx.step:.2f}",
        "CUDA ran out of memory: the KV cache leaves too little for activations, CUDA graphs or "
        "other processes. Lower gpu_memory_utilization (or max_num_seqs / max_model_len).",
        current=ctx.utilisation_current,
    )


def _other(ctx: _Context) -> _Fix:
    return _Fix(
        "vllm_serve_args",
        f"fix the error at log line {ctx.err.line}",
        "The last startup stopped on an error this check has no specific fix for.",
        where=("the vllm serve command line / environment" if ctx.engine == VLLM
               else engine_part(ctx.engine, "command line / environment")),
    )


def _name(ctx: _Context) -> str:
    """The engine whose log this is, as a sentence names it."""
    return display(ctx.engine)


FIXES: dict[str, Callable[[_Context], _Fix]] = {
    "no-cache-memory": _no_cache_memory,
    "max-len-exceeds-kv": _max_len_exceeds_kv,
    "memory-below-utilisation": _memory_below_utilisation,
    "oom": _oom,
}


@check(code="LD403", name="startup-error", symptom=SymptomClass.CAPACITY_CONFIG, cause=Cause.CONFIG)
def startup_error(
    log_facts: LogFacts,
    run: RunRecord | None = None,
    engine: EngineIdentity = UNIDENTIFIED,
    *,
    step: float = 0.05,
    margin: float = 0.02,
) -> Result:
    if not log_facts.errors:
        return Pass("no startup error in the log")
    err = current_error(log_facts)
    if err is None:
        last = log_facts.errors[-1]
        return Pass(
            f"the last startup completed; line {last.line} ({last.kind}) is not a startup failure of it: "
            f"{last.message[:120]}"
        )
    util = engine_setting("gpu_memory_utilization", log_facts, run)
    ctx = _Context(
        err=err,
        text=f"{err.message} {err.raw or ''}",
        log_facts=log_facts,
        engine=engine.id,
        run=run,
        utilisation=float(util.value) if util is not None else DEFAULT_UTILISATION,
        utilisation_current=(str(util.value) if util is not None else f"{DEFAULT_UTILISATION} (vLLM default)"
                             if engine.id == VLLM else None),
        step=step,
        margin=margin,
    )
    fix = FIXES.get(err.kind, _other)(ctx)
    evidence = [EvidenceValue("startup error", err.kind, "", f"log line {err.line}"), *fix.evidence]
    if util is not None:
        evidence.append(util.evidence("gpu_memory_utilization"))
    return Fire(
        title="The engine failed to start",
        summary=f"startup failed (log line {err.line}, {err.kind}): {err.message[:160]}",
        remediation=Remediation(
            setting=fix.setting,
            suggested=fix.suggested,
            current=fix.current,
            why=fix.why,
            where=fix.where or engine_flag(engine.id, fix.setting),
            verify=rerun("the engine starts (no error in its log) and the probe's requests succeed"),
        ),
        severity=Severity.CRITICAL,
        evidence=evidence,
    )
