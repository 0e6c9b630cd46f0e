"""Scrape vLLM's /metrics right before, during and right after the stream probe.

Each scrape keeps its raw text so analysis (and any later llm-doctor) re-derives the window
from the bundle. A scrape that fails is kept too, with its reason, and becomes one
``EvidenceError``: a dead /metrics must cost the metrics view, never the run.

llama-server's /metrics has no KV gauge (gone since 2025); its ``/slots`` says what each slot
holds, so each scrape of a llama-server also GETs ``/slots`` beside it, under the same deadline,
and keeps the slots' token counts (``server_info.slot_fields``: never the prompts). A server
started without ``--slots`` answers it with an error once, and is not asked again.

Every GET waits ``min(--timeout, what is left of the run's --deadline)``; a scrape due with
nothing left is not sent and is kept as a failure of kind ``deadline`` (the run's, not the
engine's).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from doctor.engine_metrics.window import parse_scrape
from doctor.engines import server_info
from doctor.engines.names import LLAMACPP
from doctor.evidence import EvidenceError, MetricsEvidence, Scrape
from doctor.foundation import wire
from doctor.foundation.clock import Clock
from doctor.probes.deadlines import RunDeadline
from doctor.probes.http import (
    BodyTooLarge,
    DeadlineExceeded,
    bounded_get,
    error_kind,
    http_client,
    join_url,
    without_credentials,
)

#: What a failed scrape keeps of its body (an HTML error page says who answered).
ERROR_BODY_CHARS = 2048


class Scraper:
    """GETs one /metrics URL on demand and, inside ``during()``, every ``interval_s`` seconds."""

    def __init__(
        self,
        url: str,
        clock: Clock,
        *,
        interval_s: float = 1.0,
        headers: Mapping[str, str] | None = None,
        verify: bool | str = True,
        timeout_s: float = 10.0,
        run: RunDeadline | None = None,
        usable: Callable[[Scrape], str | None] | None = None,
        source: str = "metrics",
    ) -> None:
        self.url = without_credentials(url)  # what the bundle and messages show
        # why a scrape is unusable (None: usable); an engine's by default, a router's from its caller
        self._usable = usable
        self.source = source
        self._fetch_url = url
        self.clock = clock
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self.run = run
        self._client: httpx.Client | None = None
        self._setup_error: str | None = None
        try:
            self._client = http_client(headers, verify, timeout_s)
        except (OSError, ssl.SSLError) as exc:  # every scrape reports it; the run goes on
            self._setup_error = f"cannot use the CA certificates {verify}: {exc}"
        self._lock = threading.Lock()
        self._scrapes: list[Scrape] = []
        self._failures: list[tuple[str, str]] = []  # (kind, message) per failed scrape
        self._slots_url: str | None = join_url(url.rsplit("/metrics", 1)[0], server_info.SLOTS_PATH)

    def scrape(self, phase: str) -> None:
        """One GET, stored as a ``Scrape``; a failure is stored with its reason, never raised."""
        t = self.clock.now()
        scrape = Scrape(phase=phase, t=t, wall=self.clock.t0_wall + t)
        kind: str | None
        timeout = self._timeout()
        if timeout <= 0 and phase == "during":
            return  # a beat due after the run's deadline: no scrape is owed, and none is kept
        if self._client is None:
            kind, scrape.error = "tls", self._setup_error
        elif timeout <= 0 and self.run is not None:
            kind, scrape.error = "deadline", self.run.spent(f"GET {self.url}")
        else:
            kind = self._fill(scrape, self._client, timeout)
        with self._lock:
            self._scrapes.append(scrape)
            if kind is not None:
                self._failures.append((kind, f"{phase} scrape: {scrape.error}"))

    def so_far(self) -> list[Scrape]:
        """The scrapes taken so far (a copy: the background thread keeps adding), for the wedge watchdog."""
        with self._lock:
            return list(self._scrapes)

    def _fill(self, scrape: Scrape, client: httpx.Client, timeout: float) -> str | None:
        """GET into ``scrape``; the ``EvidenceError.kind`` when it is unusable, else ``None``."""
        try:
            response, text = bounded_get(client, self._fetch_url, deadline_s=timeout)
        except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge, OSError) as exc:
            scrape.error = f"GET {self.url} failed: {str(exc) or type(exc).__name__}"
            return error_kind(exc)
        scrape.status = response.status_code
        scrape.content_type = response.headers.get("content-type")
        scrape.text = text
        if self._usable is not None:
            parsed, reason = None, self._usable(scrape)
        else:
            parsed, reason = parse_scrape(scrape)
        if reason is None:
            if parsed is not None and parsed.engine == LLAMACPP:
                scrape.slots = self._slots(client)
            return None
        scrape.error = reason
        scrape.text = text[:ERROR_BODY_CHARS]
        return "http-status" if response.status_code != 200 else "malformed"

    def _slots(self, client: httpx.Client) -> list[dict[str, Any]] | None:
        """llama-server's slots now; ``None`` (and never again) when it does not serve them."""
        if self._slots_url is None:
            return None
        try:
            timeout = self._timeout()
            if timeout <= 0:
                return None  # no time left for it now: asked again at the next scrape
            response, text = bounded_get(client, self._slots_url, deadline_s=timeout)
            slots = server_info.slot_fields(wire.loads(text)) if response.status_code == 200 else None
        except (httpx.HTTPError, DeadlineExceeded, BodyTooLarge, OSError, wire.WireError):
            slots = None
        if slots is None:
            self._slots_url = None
        return slots

    def _timeout(self) -> float:
        """What the next GET may wait: ``timeout_s``, or what is left of the run's deadline."""
        return self.timeout_s if self.run is None else self.run.grant(self.timeout_s)

    @contextmanager
    def during(self) -> Iterator[Scraper]:
        """Scrape every ``interval_s`` in a background thread while the block runs."""
        if self.interval_s <= 0:
            yield self
            return
        stop = threading.Event()

        def loop() -> None:
            start = time.monotonic()
            beats = 0
            # A fixed schedule (not "sleep after each scrape") keeps the interval honest
            # when scrapes are slow.
            while True:
                beats += 1
                if stop.wait(max(0.0, start + beats * self.interval_s - time.monotonic())):
                    return
                if self._timeout() <= 0:
                    return  # the run's deadline passed: the beats missed behind slow scrapes are owed no more
                try:
                    self.scrape("during")
                except Exception as exc:  # noqa: BLE001 - a bug here must cost one sample, not the probe
                    with self._lock:
                        self._failures.append(("internal", f"during scrape: {type(exc).__name__}: {exc}"))

        thread = threading.Thread(target=loop, name="llm-doctor-metrics", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            stop.set()
            thread.join(self.timeout_s + 1.0)

    def result(self) -> tuple[MetricsEvidence, list[EvidenceError]]:
        """The scrapes so far and one error per distinct failure; closes the HTTP client."""
        if self._client is not None:
            self._client.close()
        with self._lock:
            scrapes = sorted(self._scrapes, key=lambda s: s.t)
            failures = Counter(self._failures)
        usable = sum(1 for s in scrapes if s.error is None)
        errors = [
            EvidenceError(
                source=self.source,
                target=self.url,
                action="GET /metrics",
                kind=kind,
                message=message if n == 1 else f"{message} ({n} scrapes)",
                fatal=usable < 2,
            )
            for (kind, message), n in failures.items()
        ]
        return MetricsEvidence(url=self.url, scrapes=scrapes, interval_s=self.interval_s), errors
