"""Engines' Prometheus metrics: names across versions and engines, window deltas from scrapes or history.

``metric_names`` knows what each engine called each quantity in each version (from the records in
``doctor.engines``); ``window`` turns raw /metrics scrapes into a ``MetricsWindow``; ``history``
does the same from Prometheus API answers; both share ``readings.assemble`` so totals, per-engine
figures and quantiles follow one rule. ``runtime`` and ``standstill`` read the serving process's
counters scrape by scrape.
"""
