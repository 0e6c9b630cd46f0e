"""llm-doctor: where the latency of a self-hosted LLM stack is created, why, and what to change.

The flow is gather -> evidence -> checks -> diagnosis -> render:

- ``doctor.probes`` gather (the only code with side effects) into a typed ``doctor.evidence.Bundle``;
- ``doctor.derive`` computes pure views of the evidence (stream statistics, metric deltas, log facts);
- ``checks/`` holds one pure check per file, registered by ``doctor.checking.contract.check``;
- ``doctor.checking.runner`` runs the checks and ``doctor.verdict`` picks the dominant symptom;
- ``reports/`` renders the resulting ``doctor.model.Report``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
