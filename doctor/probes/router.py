"""Read the router between the gateway and the replicas: its worker list, its /metrics and each
replica's /metrics, before, during and after the stream probe.

The router's /metrics is scraped like the engine's (``doctor.probes.metrics.Scraper``, its scrapes
judged by ``doctor.routers.reading.scrape_problem``), at ``--router-metrics`` or, when not given,
at the router's own ``/metrics`` (vllm-router serves its metrics on ``--prometheus-port``, another
port: that miss is a note naming the flag, and the run goes on). The replicas are those its worker
list names, else the ``--engine`` given; each gets a scraper of its own, so an unreachable
replica is its failed scrapes (a finding at analysis), never a crash. Every GET has the run's
deadline; the worker list is read once, bounded like any body.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager

import httpx

from doctor.evidence import EvidenceError, ReplicaScrapes, RouterEvidence, Scrape
from doctor.foundation.clock import Clock
from doctor.probes.deadlines import RunDeadline
from doctor.probes.http import BodyTooLarge, DeadlineExceeded, bounded_get, http_client, join_url, without_credentials
from doctor.probes.metrics import Scraper
from doctor.routers import RECORDS
from doctor.routers.reading import MAX_REPLICAS, scrape_problem, worker_urls

#: What of the worker list's answer is kept: a list of 256 replicas fits.
WORKERS_BODY_CHARS = 65536
#: Routes that list a router's replicas, from the records (vllm-router and sglang-router: /workers).
WORKER_ROUTES: tuple[str, ...] = tuple(dict.fromkeys(r.worker_list for r in RECORDS if r.worker_list))


class RouterWatch:
    """The router's scraper and one per replica, started together around the stream probe."""

    def __init__(self, url: str, clock: Clock, *, metrics_url: str | None, engines: Sequence[str], args: Sequence[str],
                 log_lines: Sequence[str], headers: Mapping[str, str] | None, verify: bool | str, timeout_s: float,
                 interval_s: float, run: RunDeadline | None) -> None:
        self.evidence = RouterEvidence(url=without_credentials(url), args=list(args), log_lines=list(log_lines))
        self._url, self._clock, self._run = url, clock, run
        self._headers, self._verify, self._timeout_s, self._interval_s = headers, verify, timeout_s, interval_s
        self._engines = list(engines)
        metrics = metrics_url or join_url(url, "/metrics")
        self.evidence.metrics_url = without_credentials(metrics)
        self._router = self._scraper(metrics, usable=scrape_problem)
        self._replicas: list[tuple[ReplicaScrapes, Scraper]] = []

    def _scraper(self, url: str, usable: Callable[[Scrape], str | None] | None = None) -> Scraper:
        return Scraper(url, self._clock, interval_s=self._interval_s, headers=self._headers, verify=self._verify,
                       timeout_s=self._timeout_s, run=self._run, usable=usable, source="router")

    def _get(self, client: httpx.Client, route: str) -> tuple[int | None, str, str | None]:
        timeout = self._timeout_s
        if self._run is not None:
            timeout = self._run.grant(timeout)
        if timeout <= 0:
            return None, "", "the run's deadline passed"
        try:
            response, text = bounded_get(client, join_url(self._url, route), deadline_s=timeout)
        except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge, OSError) as exc:
            return None, "", str(exc) or type(exc).__name__
        return response.status_code, text[:WORKERS_BODY_CHARS], None

    def start(self) -> None:
        """Read the worker list, pick the replicas, and take the 'before' scrapes."""
        try:
            client = http_client(self._headers, self._verify, self._timeout_s)
        except (OSError, ssl.SSLError) as exc:
            self.evidence.notes.append(f"cannot use the CA certificates: {exc}")
            client = None
        urls: list[str] = []
        if client is not None:
            with client:
                for route in WORKER_ROUTES:
                    status, text, error = self._get(client, route)
                    if status == 200:
                        found, why = worker_urls(text)
                        self.evidence.workers_route, self.evidence.workers_answer = route, text
                        urls = found
                        if why:
                            self.evidence.notes.append(f"{route}: {why}")
                        break
                    self.evidence.notes.append(f"no worker list at {route} ({error or f'HTTP {status}'})")
        source = "worker list"
        if not urls:
            urls, source = self._engines, "--engine"
        for replica in urls[:MAX_REPLICAS]:
            scraper = self._scraper(join_url(replica, "/metrics"))
            self._replicas.append((ReplicaScrapes(url=without_credentials(replica), source=source), scraper))
        if not self._replicas:
            self.evidence.notes.append("no replica to read: the router lists none and no --engine was given")
        self.scrape("before")

    def scrape(self, phase: str) -> None:
        for scraper in (self._router, *(s for _, s in self._replicas)):
            scraper.scrape(phase)

    @contextmanager
    def during(self) -> Iterator[RouterWatch]:
        """Every scraper's background scrapes while the block runs."""
        with ExitStack() as stack:
            for scraper in (self._router, *(s for _, s in self._replicas)):
                stack.enter_context(scraper.during())
            yield self

    def result(self) -> tuple[RouterEvidence, list[EvidenceError]]:
        """The evidence so far; the router's scrape failures as errors, a replica's as its scrapes (a finding)."""
        router, errors = self._router.result()
        self.evidence.scrapes = router.scrapes
        if not any(s.error is None for s in router.scrapes):
            record = next((r for r in RECORDS if r.metrics_port), None)
            hint = f" (vllm-router serves it on {record.metrics_port}: give --router-metrics)" if record else ""
            self.evidence.notes.append(f"the router's /metrics at {self.evidence.metrics_url} was not usable{hint}")
        for replica, scraper in self._replicas:
            evidence, _ = scraper.result()
            replica.scrapes = evidence.scrapes
            self.evidence.replicas.append(replica)
        return self.evidence, [e for e in errors if not e.fatal]


#: Lines of the router's startup log kept: its settings are stated in its first few dozen.
LOG_LINES = 400
#: Bytes of it read.
LOG_BYTES = 1 << 20


def read_router_log(path: str) -> tuple[list[str], list[EvidenceError]]:
    """The first lines of the router's startup log (ANSI colours removed), bounded; an unreadable file is an error."""
    try:
        with open(path, "rb") as f:
            text = f.read(LOG_BYTES).decode("utf-8", errors="replace")
    except OSError as exc:
        return [], [EvidenceError("router", path, "read", "unreadable", f"cannot read the router's log: {exc.strerror or exc}")]
    lines = [_ANSI.sub("", line)[:4096] for line in text.splitlines()[:LOG_LINES]]
    return lines, []


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
