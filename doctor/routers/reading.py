"""A router's raw evidence read into numbers: its /metrics per replica, its worker list, its settings.

Pure. Every input is untrusted (a router's answer, a user's flags and log): a /metrics with a label
per request id, a worker list of thousands, a line of a megabyte. Replicas beyond ``MAX_REPLICAS``
and label values beyond ``MAX_LABEL_CHARS`` are cut, and the cut is said, so a huge label set costs
a note, never the analysis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from doctor.engine_metrics.metric_names import ExpositionError, metric_families
from doctor.evidence.metrics import Scrape
from doctor.foundation import wire
from doctor.routers import RECORDS, identify
from doctor.routers.record import RouterRecord

#: Replicas read per router scrape or worker list: more than any router fronts.
MAX_REPLICAS = 256
#: Characters of one replica's name kept (a URL with a path).
MAX_LABEL_CHARS = 256


@dataclass
class RouterSample:
    """One router scrape as numbers: per replica (its label value) each per-replica quantity the
    record names, and the router-wide ones (``retries``, ``queue``, ``saturation``, summed)."""

    t: float
    per_replica: dict[str, dict[str, float]] = field(default_factory=dict)
    totals: dict[str, float] = field(default_factory=dict)
    cut: int = 0  # replicas beyond MAX_REPLICAS, not read


def _names(text: str) -> list[str]:
    return [f.name for f in metric_families(text)]


def scrape_problem(scrape: Scrape) -> str | None:
    """Why a router's /metrics scrape is unusable (an engine's, an HTML page, no router family); None when usable."""
    if scrape.error:
        return scrape.error
    if scrape.status is not None and scrape.status != 200:
        return f"the router's /metrics answered HTTP {scrape.status}"
    body = scrape.text.lstrip()
    if not body or body[:1] == "<":
        return "the router's /metrics answered no Prometheus text"
    try:
        names = _names(scrape.text)
    except (ExpositionError, ValueError) as exc:
        return f"the router's /metrics does not parse: {exc}"
    if identify(names) is None:
        known = ", ".join(p for r in RECORDS for p in r.prefixes)
        return f"no router's metric in that /metrics (known: {known}): is it the engine's, or is the router's on another port?"
    return None


def record_of(scrapes: Sequence[Scrape]) -> RouterRecord | None:
    """The router product that wrote the scrapes (the first usable one says)."""
    for scrape in scrapes:
        if scrape_problem(scrape) is None:
            return identify(_names(scrape.text))
    return None


def read_scrape(scrape: Scrape, record: RouterRecord) -> RouterSample:
    """The numbers of one usable scrape, by the record's names (counters by their family name)."""
    sample = RouterSample(t=scrape.t)
    wanted = {name.removesuffix("_total"): quantity for quantity, name in record.metrics.items()}
    seen: set[str] = set()
    for family in metric_families(scrape.text):
        quantity = wanted.get(family.name.removesuffix("_total"))
        if quantity is None:
            continue
        for s in family.samples:
            if s.name.endswith(("_created", "_bucket", "_sum", "_count")) and not s.name.endswith("_total"):
                continue
            value = float(s.value)
            if not math.isfinite(value):
                continue
            replica = s.labels.get(record.replica_label or "", "")[:MAX_LABEL_CHARS] if record.replica_label else ""
            if replica and quantity not in ("retries", "queue", "saturation"):
                if replica not in seen and len(seen) >= MAX_REPLICAS:
                    sample.cut += 1
                    continue
                seen.add(replica)
                slot = sample.per_replica.setdefault(replica, {})
                slot[quantity] = slot.get(quantity, 0.0) + value
            else:
                sample.totals[quantity] = sample.totals.get(quantity, 0.0) + value
    return sample


def worker_urls(answer: str | None) -> tuple[list[str], str | None]:
    """The replica URLs a worker list names (``{"workers": [{"url": ...}]}`` or ``{"urls": [...]}``),
    at most ``MAX_REPLICAS``; and why none could be read, when so."""
    if not answer:
        return [], "no worker list"
    try:
        body: Any = wire.loads(answer)
    except wire.WireError as exc:
        return [], f"the worker list is not JSON: {exc}"
    items: Iterable[Any] = []
    if isinstance(body, dict):
        items = body.get("workers") or body.get("urls") or []
    urls = [str(i.get("url") if isinstance(i, dict) else i)[:MAX_LABEL_CHARS] for i in items if isinstance(i, (dict, str))]
    urls = [u for u in urls if u.startswith(("http://", "https://"))]
    return urls[:MAX_REPLICAS], None if urls else "the worker list names no replica URL"


@dataclass(frozen=True)
class SettingInUse:
    """A router setting's value and where it was read: ``--router-args``, the router's log, or the
    product's default (``default``: not stated by this deployment)."""

    key: str
    flag: str
    value: str | None
    source: str

    def said(self) -> str:
        """``--policy cache_aware (router's log)``, or the flag and ``default X`` when nothing stated it."""
        if self.value is None:
            return f"{self.flag} (value not known)"
        return f"{self.flag} {self.value} ({self.source})"


def _snake(value: str) -> str:
    """``RoundRobin`` (the router's log) -> ``round_robin`` (its flag's spelling)."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", value).lower()


def settings_in_use(record: RouterRecord, args: Sequence[str], log_lines: Sequence[str]) -> dict[str, SettingInUse]:
    """Each setting the record spells, from the flags as deployed, else the router's startup log,
    else the product's default."""
    given: dict[str, str] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            flag, eq, value = arg.partition("=")
            given[flag] = value if eq else (args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("--") else "true")
    out: dict[str, SettingInUse] = {}
    for key, setting in record.settings.items():
        if setting.flag in given:
            out[key] = SettingInUse(key, setting.flag, given[setting.flag], "--router-args")
            continue
        logged = next((m.group(1) for line in log_lines if setting.logged and (m := re.search(setting.logged, line[:4096]))), None)
        if logged is not None:
            out[key] = SettingInUse(key, setting.flag, _snake(logged) if key == "policy" else logged, "router's log")
        else:
            out[key] = SettingInUse(key, setting.flag, setting.default, "default")
    return out
