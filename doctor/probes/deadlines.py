"""How long the probe waits for each phase of a request, and the bound a gateway is held to.

Every phase has its own deadline, so no server can hold a request longer than the phase allows
by sending a little at a time (a slowloris):

- connect (TCP and TLS) and writing the request: ``--timeout`` (``HttpOptions.timeout_s``);
- silence: ``--stall-timeout`` without a byte, in any phase (``stall``);
- the response head: ``--stall-timeout`` from the send, for the whole head, not per byte (a head
  dripped a byte a second would otherwise never time out: ``head-timeout``); on the gateway path
  beside a direct path that answers within budget, also ``gateway_head_bound`` (below);
- the first token: ``--stall-timeout`` from the response head; each next token, and the stream's
  end: ``--stall-timeout`` from the previous token. A token, not a byte: keep-alive comments or an
  event dripped byte by byte do not extend it (``stall``, saying the bytes came);
- the whole request: ``--deadline``, the probe's own, which no request outlives (``deadline``:
  censored then, no failure of the target).

The per-phase deadlines bind once a phase has had a byte (``transport.ReadLog.phase``); silence
stays the per-read timeout's, which starts when the client reads again, so a client that froze
does not time out a server that was not silent that long (``client-stall``).

A hung server (it accepts connections and answers nothing, not even ``GET /version``) already cost
the endpoints probe its whole ``--timeout``: its stream requests are then held to ``HUNG_FLOOR_S``
for their response head (``silent_head_bound``), so that the probe's two requests (a warm-up and
one measured, which stops the path: ``head-timeout`` is decisive) confirm it in seconds, and the
run names it within about 20 s instead of waiting a stall timeout per request.

A hung gateway (it accepts the connection and never answers) beside an engine that answers in
50 ms would otherwise cost the stall timeout per request. So once the direct path has answered
within the TTFT budget, a gateway request with no response head after

    max(HUNG_FLOOR_S, HUNG_TTFT_FACTOR x direct TTFT p99, HUNG_E2E_FACTOR x direct E2E p99)

is given up (``head-timeout``, the bound and its basis recorded on the request); so is one whose
head came but no first token within the same bound of its send (``stall``, recorded as
``first_token_deadline_s``): a gateway that answers its head and then holds the stream is as hung
to its users. The endpoints probe holds the gateway's GETs to the same rule, with the direct
path's GET answer times for both terms (a few KiB: its first byte is about its end). Each term keeps
a working gateway clear of it: no gateway adds 20 times the engine's own first-token time to its
response head; one that holds the whole answer, head included, until the end (a buffering edge)
still answers by about the direct path's end-to-end time; and 5 s absorbs a cold upstream
connection or a slow authentication hop. With the defaults (a 30 s duration, a 10 s endpoints
timeout) a hung gateway then ends the run in about 20 s instead of 100.

The run as a whole ends by ``--deadline`` (``RunDeadline``): the stream probe is given what is
left of it when it starts, and every other network step (the endpoints' GETs, each /metrics
scrape, Prometheus) ``min(--timeout, what is left)``, so that no step's own timeout carries the
run past the deadline the user gave. Only local work follows: the startup log, the model config,
and the report.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from dataclasses import dataclass

from doctor.evidence import ProbePath, RequestTrace
from doctor.evidence.stream import DIRECT_BASIS, SILENT_BASIS, STALL_BASIS
from doctor.foundation.units import fmt_seconds

#: The gateway's head bound is never under this many seconds.
HUNG_FLOOR_S = 5.0
#: ... nor under this multiple of the direct path's TTFT p99 ...
HUNG_TTFT_FACTOR = 20.0
#: ... nor under this multiple of the direct path's end-to-end p99.
HUNG_E2E_FACTOR = 2.0


@dataclass(frozen=True)
class HeadBound:
    """A response head's deadline: seconds from the send, what it derives from, and the sentence saying so."""

    seconds: float
    basis: str
    why: str


def p99(values: list[float]) -> float:
    """The nearest-rank 99th percentile (the largest value below 100 samples): a bound must not undercut any."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)]


def direct_bound(ttfts: list[float], e2es: list[float], ttft_budget_s: float, what: str = "TTFT") -> HeadBound | None:
    """The bound a gateway's answer is held to, from the direct path's answer times: its times to the
    first token (``what``) and to the end; None while it has none, or answers over the TTFT budget
    (then the gateway's silence may be the engine's own slowness). The one rule of the module
    docstring, for the stream probe's requests and the endpoints probe's GETs alike."""
    if not ttfts or p99(ttfts) > ttft_budget_s:
        return None
    ttft, e2e = p99(ttfts), p99(e2es)
    seconds = max(HUNG_FLOOR_S, HUNG_TTFT_FACTOR * ttft, HUNG_E2E_FACTOR * e2e)
    why = (f"while the direct path's {what} p99 is {fmt_seconds(ttft)} (bound: max({HUNG_FLOOR_S:g} s, "
           f"{HUNG_TTFT_FACTOR:g}x that, {HUNG_E2E_FACTOR:g}x its E2E p99 {fmt_seconds(e2e)}; n={len(ttfts)})")
    return HeadBound(seconds, DIRECT_BASIS, why)


def gateway_head_bound(traces: Iterable[RequestTrace], ttft_budget_s: float) -> HeadBound | None:
    """The bound a gateway's response head and first token are held to, from the direct path's
    successful answers so far (warm-ups too: a cold first answer only raises it); ``direct_bound``."""
    ttfts: list[float] = []
    e2es: list[float] = []
    for t in traces:
        if t.path != ProbePath.DIRECT or not t.ok or t.t_sent is None or t.t_first_token is None or t.t_end is None:
            continue
        ttfts.append(t.t_first_token - t.t_sent)
        e2es.append(t.t_end - t.t_sent)
    return direct_bound(ttfts, e2es, ttft_budget_s)


def silent_head_bound(unanswered_s: float, path: ProbePath = ProbePath.DIRECT) -> HeadBound:
    """The response head's deadline on a path whose target answered the endpoints probe's GET /version
    not a byte in ``unanswered_s`` (its whole ``--timeout``): the second witness need not wait as long.
    A gateway that silent may only be waiting on its upstream (its connect timeout over ``--timeout``)."""
    if path == ProbePath.GATEWAY:
        return HeadBound(HUNG_FLOOR_S, SILENT_BASIS,
                         f"(the gateway accepted GET /version too and sent not a byte back in {unanswered_s:g} s: "
                         "the gateway or its upstream, e.g. a connect to an engine it cannot reach)")
    return HeadBound(HUNG_FLOOR_S, SILENT_BASIS,
                     f"(hung: the server accepted GET /version too and sent not a byte back in {unanswered_s:g} s)")


def stall_head_bound(stall_timeout_s: float) -> HeadBound:
    """The response head's own deadline on every path: ``--stall-timeout`` for the whole head."""
    return HeadBound(stall_timeout_s, STALL_BASIS, "the --stall-timeout, for the whole head")


class RunDeadline:
    """The whole run's ``--deadline``, from the moment the collector starts: every network step
    (endpoints, each /metrics scrape, the stream probe, Prometheus) and each call inside one gets
    ``min(its own timeout, what is left)``, and one with nothing left is not started (an
    ``EvidenceError`` of kind ``deadline``). Read from several threads (the background scrapes):
    it only reads the monotonic clock after construction."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds until the run's deadline (negative once it passed)."""
        return self.end - time.monotonic()

    def grant(self, own_s: float) -> float:
        """What a call whose own timeout is ``own_s`` may wait now, in whole milliseconds (it is said
        in messages and recorded; rounded down, never past the deadline); 0 or less: it must not start."""
        return min(own_s, math.floor(self.left() * 1000) / 1000)

    def spent(self, what: str) -> str:
        """The sentence of a step not started for lack of time."""
        return f"{what} not started: the run's {self.seconds:g} s --deadline had run out"
