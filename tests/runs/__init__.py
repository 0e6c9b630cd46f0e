"""Repeated and comparative runs (``doctor.runs``): compare, baselines, fleets, load, sweeps, watch."""
