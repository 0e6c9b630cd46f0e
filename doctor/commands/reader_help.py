"""The help of the ``log`` and ``metrics`` commands, which name every engine the records list.

Built from ``ENGINE_LIST`` rather than written into a docstring, so a new engine's records show
up in ``--help`` without editing the command table (``doctor.cli``).
"""

from doctor.engines.names import ENGINE_LIST

#: The ``log`` and ``metrics`` commands' help, naming every engine the records list.
LOG_HELP = (
    f"Read an engine's log ({ENGINE_LIST}): version, engine config, KV capacity, startup errors, stats over time."
    "\n\n[bold]Examples[/]\n\n  llm-doctor log vllm.log\n\n  kubectl logs deploy/vllm | llm-doctor log - --json"
)
METRICS_HELP = (
    f"Read saved /metrics scrapes of {ENGINE_LIST}: running, waiting, KV usage, preemptions, latency histograms. "
    "One file: totals since the engine started; two: the window between them."
    "\n\n[bold]Examples[/]\n\n  llm-doctor metrics before.prom after.prom\n\n  llm-doctor metrics sglang.prom --json"
)
