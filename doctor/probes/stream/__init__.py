"""The streaming probe: what the application's own request feels like, direct and through the gateway.

Each request is timed on the run's one monotonic clock, from its scheduled send (not its
actual send: a client that fell behind must not hide the wait) through connection, response
headers, first body byte, first event, every token-bearing event (stamped at the read that
carried its first byte, see ``sse``) to the stream's final event; every socket read is kept
with its size and the events it completed (see ``transport``). Failures are evidence: each
request records an ``outcome``, and each kind of failure on a path becomes one
``EvidenceError``. The probe never raises for a failure; it returns what it measured. Ctrl-C is
the one exception it lets through, as ``StreamInterrupted``, which carries what was measured
until then.

Around the requests: every phase has its own deadline (``deadlines``: the head, the first token,
each next token, the run's ``--deadline``), and a gateway request is held to the bound its direct
path sets once that path answers within budget, and a request to a target that answered the
endpoints probe nothing at all to a short one (``request.Requester._within_head_bound``); a
constrained ``--payload`` first sends its unconstrained twins (``run.Run._send_controls``, kept in
``StreamEvidence.controls``); and the wedge watchdog (``watchdog``) stops the run when requests wait
without a token while the engine's counters stand still.

The package, by what each module holds:

- ``run``: the run loop: phases, the deadline, the adaptive stop, the evidence it returns;
- ``shards``: how many client worker processes read a run's streams, and a worker's side of it;
- ``request``: one request: its body, its send, the reading of its events;
- ``failures``: an exception as an outcome and a sentence, and a run's failures per path.

The wire-level modules stay beside the package in ``doctor.probes`` (``sse``, ``framing``,
``transport``, ``http``, ``client_stack`` (the event loop and TLS context every reading process,
the endpoints probe's too, starts from), ``schedule``, ``shard``, ``sampling``, ``selfcheck``, ``deadlines``,
``watchdog``, ``payload``, ``lengths``, ``plan``): each is also read by the settings, the
load generator, the sweep, the classifier, the evidence types or the benches, so moving them
under the stream probe would make those read from inside it.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence

from doctor.evidence import EvidenceError, Scrape, StreamEvidence
from doctor.foundation.clock import Clock
from doctor.probes import kernel_stamps
from doctor.probes.client_stack import loop_name, run_loop, tls_context
from doctor.probes.plan import CollectConfig
from doctor.probes.stream.request import request_id
from doctor.probes.stream.run import CONTROL_TWINS, Run, calibrate_estimates
from doctor.probes.stream.shards import poisson_streams, shard_workers
from doctor.probes.transport import skip_missing_sniffio_imports
from doctor.probes.watchdog import Watchdog

__all__ = [
    "CONTROL_TWINS", "StreamInterrupted", "calibrate_estimates", "loop_name", "poisson_streams", "request_id",
    "run_loop", "run_stream_probe", "shard_workers",
]


class StreamInterrupted(KeyboardInterrupt):
    """Ctrl-C during the probe, with the (evidence, errors) measured until then in ``result``.

    A ``KeyboardInterrupt``, so every caller still stops; the collector keeps ``result``.
    """

    def __init__(self, result: tuple[StreamEvidence, list[EvidenceError]]) -> None:
        super().__init__("interrupted during the stream probe")
        self.result = result


def run_stream_probe(
    config: CollectConfig, clock: Clock, progress: Callable[[str], None], *, discover_model: bool = True,
    scrapes: Callable[[], Sequence[Scrape]] | None = None,
    deadline_s: float | None = None,
) -> tuple[StreamEvidence | None, list[EvidenceError]]:
    """Probe every target of ``config``: (evidence, one error per kind of failure per path).

    Synchronous (it runs its own event loop) so the collector stays plain code. ``None`` evidence
    only when nothing could be sent (no target, unusable CA bundle). ``discover_model``: ask
    ``/v1/models`` for a model when ``config`` names none; the collector turns it off when the
    endpoints probe already asked, so a silent target does not cost its deadline twice.
    ``deadline_s``: how long it may run, when less than ``--deadline`` (what the collector has left
    of the run's deadline: ``doctor.probes.deadlines.RunDeadline``).
    Raises ``StreamInterrupted`` on Ctrl-C, with the requests so far (those in flight ``cancelled``).
    ``scrapes``: the /metrics scrapes taken beside the probe so far, which the wedge watchdog reads
    (``doctor.probes.watchdog``); None: not watched.
    """
    targets = config.probed()
    if not targets:
        return None, []
    try:
        context = tls_context(config)
    except (OSError, ssl.SSLError) as exc:
        return None, [EvidenceError("stream", str(config.http.verify), "load the CA bundle", "tls",
                                    f"cannot use --ca-cert {config.http.verify}: {exc}", fatal=True)]
    skip_missing_sniffio_imports()
    kernel_stamps.keep_on()  # the kernel stamps the first reads too
    probe = Run(config, clock, progress, context, discover_model, deadline_s)
    if scrapes is not None and config.wedge_bound_s > 0:
        probe.watchdog = Watchdog(scrapes, clock, config.wedge_bound_s)
    try:
        evidence = run_loop(probe.run())
    except (KeyboardInterrupt, asyncio.CancelledError):
        raise StreamInterrupted((probe.finish(), probe.errors)) from None
    return evidence, probe.errors
