"""vLLM's Prometheus metrics: names across versions, window deltas from scrapes or history.

``names`` knows what vLLM called each quantity in each version; ``window`` turns raw /metrics
scrapes into a ``MetricsWindow``; ``history`` does the same from Prometheus API answers; both
share ``readings.assemble`` so totals, per-engine figures and quantiles follow one rule.
"""
