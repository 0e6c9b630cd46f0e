"""Gatherers: the only code that touches the network, files, NVML or other processes.

Each probe returns ``(evidence or None, [EvidenceError, ...])`` and never raises for a
failure of the thing it observes; ``doctor.collection.collector`` assembles them into a ``Bundle``.
"""
