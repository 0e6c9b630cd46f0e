"""The ``routing`` view: the router between the gateway and the replicas, read at analysis.

Per replica over the probe's window: the share of the requests the router sent it (its counter's
delta), the in-flight count the router kept for it, its own queue (the engine's waiting gauge and
queue-time histogram from the replica's /metrics), whether it answered, and what the router
thought of its health. Router-wide: its product (``doctor.routers``), its settings in use (flags
as deployed, else its log, else the product's default), its retries. Pure; ``Missing`` when no
router was read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from doctor.derive.missing import Missing
from doctor.engine_metrics.readings import NoWindow
from doctor.engine_metrics.window import window_from_scrapes
from doctor.evidence import Bundle, ReplicaScrapes
from doctor.routers.reading import RouterSample, SettingInUse, read_scrape, record_of, scrape_problem, settings_in_use


@dataclass
class ReplicaRow:
    """One replica over the window. ``requests``/``share``: what the router sent it (None: the
    router's counter was not read); ``in_flight_max``: the router's count; ``waiting_max``,
    ``waiting_mean``, ``running_max``, ``queue_s``: the replica's own engine (None: its /metrics
    not read); ``answered``: scrapes of it that succeeded, of ``scraped``; ``stopped_answering``: it
    answered before and not after; ``router_healthy``: the router's health gauge at its last read;
    ``ejected``: the router's circuit breaker was open for it at some read."""

    url: str
    requests: float | None = None
    share: float | None = None
    in_flight_max: float | None = None
    waiting_max: float | None = None
    waiting_mean: float | None = None
    running_max: float | None = None
    queue_s: float | None = None
    answered: int = 0
    scraped: int = 0
    stopped_answering: bool = False
    failure: str | None = None
    router_healthy: bool | None = None
    ejected: bool = False


@dataclass
class RouterView:
    """The router as read: product (a record id, or None when its /metrics named none), settings in
    use, one row per replica, routed and retried requests over the window, and what is missing."""

    url: str
    product: str | None = None
    display: str = "the router"
    metrics_url: str | None = None
    settings: dict[str, SettingInUse] = field(default_factory=dict)
    replicas: list[ReplicaRow] = field(default_factory=list)
    routed: float | None = None
    retries: float | None = None
    queue_max: float | None = None
    saturation_max: float | None = None
    window_s: float | None = None
    notes: list[str] = field(default_factory=list)

    def setting(self, key: str) -> SettingInUse | None:
        return self.settings.get(key)


def _key(url: str) -> str:
    return url.rstrip("/")


def _delta(first: RouterSample, last: RouterSample, replica: str, quantity: str) -> float | None:
    if quantity not in last.per_replica.get(replica, {}):
        return None
    before = first.per_replica.get(replica, {}).get(quantity, 0.0)
    now = last.per_replica[replica][quantity]
    return now - before if now >= before else now  # a reset: counted since it


def _replica_engine(row: ReplicaRow, replica: ReplicaScrapes) -> None:
    scrapes = sorted(replica.scrapes, key=lambda s: s.t)
    row.scraped = len(scrapes)
    ok = [s.error is None for s in scrapes]
    row.answered = sum(ok)
    if row.answered < row.scraped:
        row.failure = next(s.error for s in scrapes if s.error is not None)
        first_ok = ok.index(True) if any(ok) else None
        row.stopped_answering = first_ok is not None and not ok[-1]
    try:
        window = window_from_scrapes(scrapes)
    except NoWindow:
        return
    if window.waiting is not None:
        row.waiting_max = window.waiting.max
        values = [v for _, v in window.waiting.samples]
        row.waiting_mean = sum(values) / len(values) if values else None
    if window.running is not None:
        row.running_max = window.running.max
    if window.queue is not None:
        row.queue_s = window.queue.mean


def derive_routing(bundle: Bundle) -> RouterView:
    """The router and each replica behind it over the window; ``Missing`` when no router was read."""
    evidence = bundle.router
    if evidence is None:
        errors = [e.message for e in bundle.errors_for("router")]
        raise Missing("; ".join(errors) if errors else "no router was read (--router)")
    view = RouterView(url=evidence.url, metrics_url=evidence.metrics_url, notes=list(evidence.notes))
    record = record_of(evidence.scrapes)
    usable = [s for s in sorted(evidence.scrapes, key=lambda s: s.t) if scrape_problem(s) is None]
    rows: dict[str, ReplicaRow] = {}
    if record is not None:
        view.product, view.display = record.id, record.display
        view.settings = settings_in_use(record, evidence.args, evidence.log_lines)
        samples = [read_scrape(s, record) for s in usable]
        if samples and (cut := max(s.cut for s in samples)):
            view.notes.append(f"{cut} replica label(s) beyond the first {len(samples[0].per_replica)} not read")
        if len(samples) >= 2:
            first, last = samples[0], samples[-1]
            view.window_s = last.t - first.t
            for name in last.per_replica:
                row = rows.setdefault(_key(name), ReplicaRow(url=name))
                row.requests = _delta(first, last, name, "requests")
                flights = [s.per_replica.get(name, {}).get("in_flight") for s in samples]
                row.in_flight_max = max((f for f in flights if f is not None), default=None)
                health = last.per_replica[name].get("health")
                row.router_healthy = None if health is None else health > 0
                row.ejected = any(s.per_replica.get(name, {}).get("ejections", 0.0) > 0 for s in samples)
            counted = [r.requests for r in rows.values() if r.requests is not None]
            view.routed = sum(counted) if counted else None
            for row in rows.values():
                if row.requests is not None and view.routed:
                    row.share = row.requests / view.routed
            if "retries" in last.totals:
                view.retries = last.totals["retries"] - first.totals.get("retries", 0.0)
            queues = [s.totals["queue"] for s in samples if "queue" in s.totals]
            view.queue_max = max(queues) if queues else None
            saturation = [s.totals["saturation"] for s in samples if "saturation" in s.totals]
            view.saturation_max = max(saturation) if saturation else None
        else:
            view.notes.append(f"the router's /metrics gave {len(samples)} usable scrape(s): no window of its counters")
    elif evidence.scrapes:
        view.notes.append(f"the router's /metrics at {evidence.metrics_url} named no router: "
                          f"{next((p for s in evidence.scrapes if (p := scrape_problem(s))), 'unusable')}")
    for replica in evidence.replicas:
        row = rows.setdefault(_key(replica.url), ReplicaRow(url=replica.url))
        _replica_engine(row, replica)
    view.replicas = sorted(rows.values(), key=lambda r: r.url)
    return view
