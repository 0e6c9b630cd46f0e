"""The host the probe ran on, as psutil saw it before the probe: one answer to "was it CPU-saturated",
and the evidence it reads.

Two checks ask it: LD507 (more client processes would only compete for a saturated host) and
LD210 (simultaneous freezes may be CPU starvation, not a collection). One rule serves both, so a
host one of them calls saturated the other does too.
"""

from __future__ import annotations

from doctor.evidence import HostEvidence
from doctor.model import EvidenceValue


def host_saturated(host: HostEvidence | None, cpu_percent: float) -> str:
    """Why the host counts as CPU-saturated before the probe ("" when it does not, or nothing says):
    its CPU at ``cpu_percent`` or more, or a 1-minute load average at or over its logical CPUs (more
    runnable tasks than CPUs wait for one, whatever the percent a sample caught), e.g.
    "98 % CPU, load 11.5 on 8 CPUs"."""
    if host is None:
        return ""
    said = []
    if host.cpu_percent is not None and host.cpu_percent >= cpu_percent:
        said.append(f"{host.cpu_percent:.0f} % CPU")
    if host.load_avg and host.cpu_count_logical and host.load_avg[0] >= host.cpu_count_logical:
        said.append(f"load {host.load_avg[0]:g} on {host.cpu_count_logical} CPUs")
    return ", ".join(said)


def host_values(host: HostEvidence) -> list[EvidenceValue]:
    """The snapshot that rule reads, as evidence: the host's CPU percent and 1-minute load average
    before the probe (a value psutil did not give is ``None``)."""
    return [
        EvidenceValue("host CPU at the start", host.cpu_percent, "%", "host: psutil.cpu_percent, before the probe"),
        EvidenceValue("host load average (1 min) at the start", host.load_avg[0] if host.load_avg else None, "",
                      f"host: psutil.getloadavg, before the probe, of {host.cpu_count_logical or '?'} logical CPUs"),
    ]
