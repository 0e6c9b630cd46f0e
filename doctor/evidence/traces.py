"""Trace evidence: the spans the engine and the gateway exported while the probe ran.

Each span is kept as it arrived, decoded from OTLP but not interpreted: its ids, name, kind,
start and end in unix nanoseconds on the exporter's own clock (the join aligns that clock with
the client's), the service that sent it, and its attributes with their values as sent. What
the attributes mean (vLLM's ``gen_ai.latency.*``) is read at analysis time
(``doctor.derive.request_hops``), so a newer reader re-reads an old bundle.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class Span:
    """One span as an exporter sent it. Ids are lower-case hex, as ``traceparent`` spells them."""

    trace_id: str
    span_id: str
    name: str
    start_ns: int  # unix nanoseconds, the exporter's clock
    end_ns: int
    parent_span_id: str | None = None
    kind: str | None = None  # "server", "client", "internal", ...
    service: str | None = None  # the resource's ``service.name``
    scope: str | None = None  # the instrumentation scope's name
    attributes: dict[str, Any] = field(default_factory=dict)
    status: str | None = None  # "ok" or "error"; None: unset


@dataclass
class TraceEvidence:
    """What the OTLP receiver (``doctor.probes.otlp``) took in over the probe, or what a trace store
    gave back after it (``doctor.probes.tracestore``, ``--traces``), and what was refused.

    ``cap`` bounds the spans kept (a busy engine exports every user's requests); ``dropped`` counts
    those past it, ``malformed`` the payloads answered 400 (or the store's answers that did not
    decode). ``waited_s`` is how long the receiver stayed open after the last request for the
    exporters' batches to arrive, or how long the read-back waited for the store to ingest them.
    """

    source: str = ""  # "otlp" (the receiver) or the trace store's URL (--traces)
    listen: str | None = None  # the receiver's "HOST:PORT"
    cap: int = 0
    spans: list[Span] = field(default_factory=list)
    payloads: int = 0  # export requests accepted (the store's answers read)
    dropped: int = 0  # spans past the cap
    malformed: int = 0  # export requests refused (400, 413, 415); store answers that did not decode
    waited_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    def take(self, spans: list[Span]) -> int:
        """Keep ``spans`` up to the cap; the rest are counted in ``dropped``, and their number returned
        (what the receiver tells its exporter it rejected). The one rule for both sources."""
        room = max(0, self.cap - len(self.spans))
        self.spans.extend(spans[:room])
        rejected = max(0, len(spans) - room)
        self.dropped += rejected
        return rejected
