"""How a remediation is spelled: the shared verify text, the capacity advice, vLLM's flag names.

Every remediation ends in the same instruction (re-run the same probe after one change), and
names a ``vllm serve`` flag the way the command line spells it; third-party checks use these
to read like the built-in ones. Public through ``doctor.checklib``.
"""

from __future__ import annotations

from doctor.model import RERUN_INSTRUCTION, Remediation


def vllm_flag(*settings: str) -> str:
    """Where a remediation is applied: ``vllm serve flag --max-num-seqs`` for ``max_num_seqs``.

    Several settings are one place (``vllm serve flags --a / --b``), for a remediation that
    trades one against the other.
    """
    flags = " / ".join(f"--{s.replace('_', '-')}" for s in settings)
    return f"vllm serve flag{'s' if len(settings) > 1 else ''} {flags}"


def rerun(expect: str) -> str:
    """The verify text every remediation shares: same probe, one change, what to expect."""
    return f"{RERUN_INSTRUCTION}; expect {expect}"


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
