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
from dataclasses import dataclass, replace

from doctor.checking.contract import Fire, Pass, Result, check
from doctor.checklib import Setting, capped_utilization, engine_flag, engine_setting, rerun
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


@dataclass(frozen=True)
class Found:
    """The error that explains the engine's state and what its fix is computed from: the
    ``gpu_memory_utilization`` in use (else vLLM's default, ``utilisation``, quoted as such only on
    vLLM), and per kind: a KV cache on the CPU, ``max_model_len`` and what fits, the free / total
    GiB the log printed, and the utilisation to suggest (``target``)."""

    err: StartupError
    engine: str
    util: Setting | None
    utilisation: float
    cpu_cache: bool = False
    mml: Setting | None = None
    fits: int | None = None
    free: tuple[float, float] | None = None
    target: float | None = None
    step: float = 0.0


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
        return Pass(_completed(log_facts.errors[-1]))
    util = engine_setting("gpu_memory_utilization", log_facts, run)
    utilisation = float(util.value) if util is not None else DEFAULT_UTILISATION
    found = Found(err, engine.id, util, utilisation, step=step)
    if err.kind == "no-cache-memory":
        found = replace(found, cpu_cache=_found_in(err, "VLLM_CPU_KVCACHE_SPACE") is not None
                        or log_facts.value("kv_cache_device") == "CPU",
                        target=capped_utilization(utilisation + step))
    elif err.kind == "max-len-exceeds-kv":
        est = engine_setting("estimated_max_model_len", log_facts, run)
        match = _found_in(err, _ESTIMATE_RE) or _found_in(err, _STORED_RE)
        fits = int(est.value) if est is not None else None
        if fits is None and match:
            fits = int(match.group(1))
        found = replace(found, mml=engine_setting("max_model_len", log_facts, run), fits=fits)
    elif err.kind == "memory-below-utilisation":
        match = _found_in(err, _FREE_RE)
        if match:
            free, total = float(match.group(1)), float(match.group(2))
            found = replace(found, free=(free, total), target=math.floor((free / total - margin) * 100) / 100)
    elif err.kind == "oom":
        found = replace(found, target=max(0.5, utilisation - step))
    return Fire(
        title="The engine failed to start",
        summary=_summary(found),
        remediation=_remediation(found),
        severity=Severity.CRITICAL,
        evidence=_evidence(found),
    )


def _found_in(err: StartupError, pattern: re.Pattern[str] | str) -> re.Match[str] | None:
    """The first match of ``pattern`` (a regex, or a plain string) in the error's message, else in its raw line."""
    regex = re.compile(re.escape(pattern)) if isinstance(pattern, str) else pattern
    return regex.search(err.message) or regex.search(err.raw or "")


def _name(found: Found) -> str:
    """The engine whose log this is, as a sentence names it."""
    return display(found.engine)


def _utilisation_now(found: Found) -> str | None:
    """Today's ``gpu_memory_utilization``: as set, else vLLM's default (None: another engine's, whose default is not vLLM's)."""
    if found.util is not None:
        return str(found.util.value)
    return f"{DEFAULT_UTILISATION} (vLLM default)" if found.engine == VLLM else None


def _completed(last: StartupError) -> str:
    return (f"the last startup completed; line {last.line} ({last.kind}) is not a startup failure of it: "
            f"{last.message[:120]}")


def _summary(found: Found) -> str:
    err = found.err
    return f"startup failed (log line {err.line}, {err.kind}): {err.message[:160]}"


def _evidence(found: Found) -> list[EvidenceValue]:
    err = found.err
    evidence = [EvidenceValue("startup error", err.kind, "", f"log line {err.line}")]
    if err.kind == "max-len-exceeds-kv" and found.fits:
        evidence.append(EvidenceValue(f"max_model_len that fits ({_name(found)}'s estimate)", found.fits, "tokens",
                                      f"log line {err.line}"))
    if err.kind == "memory-below-utilisation" and found.free is not None:
        free, total = found.free
        evidence.append(EvidenceValue("free / total GPU memory at startup", f"{free}/{total}", "GiB", f"log line {err.line}"))
    if found.util is not None:
        evidence.append(found.util.evidence("gpu_memory_utilization"))
    return evidence


def _remediation(found: Found) -> Remediation:
    """The fix for the error's kind, in the serving engine's flags unless it names where else."""
    err, engine = found.err, found.engine
    setting, where, current = "gpu_memory_utilization", None, _utilisation_now(found)
    if err.kind == "no-cache-memory":
        why = ("The weights and activations leave no memory for KV cache blocks. Give the cache more memory, "
               "or shrink the model's footprint (quantization, a larger tensor_parallel_size).")
        if found.cpu_cache:
            setting, suggested, where, current = ("VLLM_CPU_KVCACHE_SPACE", "raise (GiB of RAM for the KV cache)",
                                                  "environment of vllm serve", None)
        else:
            suggested = f"{found.target:.2f}"
    elif err.kind == "max-len-exceeds-kv":
        setting = "max_model_len"
        suggested = str(found.fits) if found.fits else "lower it to what the KV cache holds"
        why = (f"One request of max_model_len needs more KV cache than the engine has, so {_name(found)} refuses to "
               "start. Serve a shorter context, or raise gpu_memory_utilization to grow the cache.")
        current = str(found.mml.value) if found.mml is not None else None
    elif err.kind == "memory-below-utilisation":
        suggested = f"{found.target:.2f}" if found.target is not None else "below the free share of the device"
        why = (f"Other processes hold GPU memory, so the share {_name(found)} was asked to take is not free. Lower "
               "gpu_memory_utilization below the free share, or stop what else runs on the GPU.")
    elif err.kind == "oom":
        suggested = f"{found.target:.2f}" if current else f"lower it by {found.step:.2f}"
        why = ("CUDA ran out of memory: the KV cache leaves too little for activations, CUDA graphs or "
               "other processes. Lower gpu_memory_utilization (or max_num_seqs / max_model_len).")
    else:
        setting, suggested, current = "vllm_serve_args", f"fix the error at log line {err.line}", None
        why = "The last startup stopped on an error this check has no specific fix for."
        where = ("the vllm serve command line / environment" if engine == VLLM
                 else engine_part(engine, "command line / environment"))
    return Remediation(
        setting=setting,
        suggested=suggested,
        current=current,
        why=why,
        where=where or engine_flag(engine, setting),
        verify=rerun("the engine starts (no error in its log) and the probe's requests succeed"),
    )
