"""How a remediation is spelled: the shared verify text, the capacity advice, engines' flag names.

Every remediation ends in the same instruction (re-run the same probe after one change, through
``llm-doctor verify REPORT --candidate URL``; for a change of numerics that command with the answers
gate's baseline; a scaling change's is ``scaling.rescan``), and names the engine's flag the way its
command line spells it: ``vllm serve``'s, or the other engines' own for the same setting
(``ENGINE_FLAGS``); third-party checks use these to read like the built-in ones. Public through ``doctor.checklib``.
"""

from __future__ import annotations

from collections.abc import Iterable

from doctor.engines import RECORDS
from doctor.engines.names import DISPLAY, UNKNOWN, VLLM, display
from doctor.model import RERUN_INSTRUCTION, Remediation, gated_rerun_instruction

#: vLLM setting -> the flag each other engine has for it, as its launcher spells it (each
#: record's ``flags``: SGLang ``python -m sglang.launch_server``, llama.cpp ``llama-server``, TGI
#: ``text-generation-launcher``, ``trtllm-serve``); a setting an engine lacks is absent and reads
#: "not exposed by ENGINE".
ENGINE_FLAGS: dict[str, dict[str, str]] = {
    setting: {r.id: r.flags[setting] for r in RECORDS if setting in r.flags}
    for setting in dict.fromkeys(s for r in RECORDS for s in r.flags)
}


def vllm_flag(*settings: str) -> str:
    """Where a remediation is applied: ``vllm serve flag --max-num-seqs`` for ``max_num_seqs``.

    Several settings are one place (``vllm serve flags --a / --b``), for a remediation that
    trades one against the other.
    """
    flags = " / ".join(f"--{s.replace('_', '-')}" for s in settings)
    return f"vllm serve flag{'s' if len(settings) > 1 else ''} {flags}"


def engine_flag(engine: str | None, *settings: str) -> str:
    """``vllm_flag`` for the engine that served: ``SGLang flag --max-running-requests`` for
    ``max_num_seqs`` on SGLang, ``vllm serve flag --max-num-seqs`` on vLLM (or for ``None``: a
    caller that names no engine). A setting the engine lacks says so and names vLLM's, so the
    advice is still read.
    On an unidentified engine (``UNKNOWN``) it names the limit and how each known engine spells
    it, never one engine's flag as if it were that engine's."""
    if engine in (None, VLLM):
        return vllm_flag(*settings)
    if engine == UNKNOWN:
        return unidentified_setting(" / ".join(settings), _spellings(settings))
    flags = [ENGINE_FLAGS.get(s, {}).get(engine) for s in settings]
    if all(flags):
        return f"{display(engine)} flag{'s' if len(flags) > 1 else ''} {' / '.join(f for f in flags if f)}"
    lacking = [s for s, f in zip(settings, flags, strict=True) if not f]
    return f"not exposed by {display(engine)} ({', '.join(lacking)}: {vllm_flag(*settings)} on vLLM)"


def unidentified_setting(what: str, spellings: Iterable[str]) -> str:
    """Where a remediation is applied on an unidentified engine (``UNKNOWN``), in the one neutral
    wording every check shares: the limit, and how each known engine spells it as possibilities,
    never one engine's flag as if it were that engine's nor "not exposed" (nothing says it is not)."""
    return f"the engine's own setting for {what} (unidentified engine; {', '.join(spellings)})"


def _spellings(settings: tuple[str, ...]) -> list[str]:
    """How each known engine spells ``settings``: ``vLLM --max-num-seqs``, ``SGLang --max-running-requests``, ..."""
    spelled = [f"{DISPLAY[VLLM]} {' / '.join('--' + s.replace('_', '-') for s in settings)}"]
    for engine in (r.id for r in RECORDS if r.id != VLLM):
        flags = [ENGINE_FLAGS.get(s, {}).get(engine) for s in settings]
        if all(flags):
            spelled.append(f"{DISPLAY[engine]} {' / '.join(f for f in flags if f)}")
    return spelled


def rerun(expect: str) -> str:
    """The verify text every remediation shares: same probe, one change (``RERUN_INSTRUCTION``, which
    names ``llm-doctor verify REPORT --candidate URL`` for the latency half), what to expect."""
    return f"{RERUN_INSTRUCTION}; expect {expect}"


def rerun_gated(expect: str, *, long_context: bool = False) -> str:
    """The verify text of a remediation that changes the model's numerics (fp8, speculative decoding,
    a quantised or swapped model): one ``llm-doctor verify`` command, the gate (``gate_command``), that
    says both whether the verdict's symptom is gone and whether the answers kept, then what to expect.

    ``long_context``: the change is the KV cache's precision (``kv_cache_dtype``), whose loss shows
    at long context, where the gate's short prompts and per-token KL do not reach: the gate then
    runs its needle probe at the deployment's ``max_model_len`` too (``--long-context``).
    """
    return f"{gated_rerun_instruction(long_context=long_context)}; expect {expect}"


def add_capacity(why: str, verify: str) -> Remediation:
    """The capacity remediation queue-bound checks share: more replicas, or less offered load.

    ``why`` states the check's own numbers; the advice is the same whichever check saw the queue.
    """
    return Remediation(
        setting="replicas",
        suggested="add capacity or lower the offered concurrency",
        where="the deployment (replica count / load balancer) or the clients' concurrency",
        why=why,
        verify=rerun(verify),
    )
