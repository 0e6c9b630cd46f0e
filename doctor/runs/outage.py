"""What a down target looks like in a bundle, and when ``watch`` tries it again.

A target is *down* on a path when the stream probe measured requests there and not one reached
it (every outcome in ``UNREACHABLE_KINDS``: refused, unresolved, no TLS, no connection in time),
or not one got a response head within its deadline (``head-timeout``: a gateway that accepts
connections and never answers is as down for its users as one that refuses them).
A slow or erroring target is not down: it answered, and its latency or its errors are the
diagnosis. A round that finds a target down is still a complete, reported round (exit 1 from
LD501, ``llm_doctor_up`` 0); ``watch`` retries it a few times first, so a pod restarting under a
rolling update is not reported as an outage when it is back two seconds later.
"""

from __future__ import annotations

from doctor.evidence import Bundle
from doctor.evidence.errors import UNREACHABLE_KINDS
from doctor.evidence.stream import HEAD_TIMEOUT

#: Request outcomes that mean no answer came from the target at all.
DOWN_OUTCOMES = UNREACHABLE_KINDS | {HEAD_TIMEOUT}

#: The first retry's wait; each next one doubles it.
FIRST_RETRY_S = 1.0


def unreachable_paths(bundle: Bundle) -> dict[str, str]:
    """``{path: the failure kinds}`` of each probed path on which no request reached its target."""
    if bundle.stream is None:
        return {}
    by_path: dict[str, list[str]] = {}
    for request in bundle.stream.requests:
        by_path.setdefault(request.path, []).append(request.outcome)
    return {path: ", ".join(sorted(set(outcomes))) for path, outcomes in by_path.items()
            if all(outcome in DOWN_OUTCOMES for outcome in outcomes)}


def retry_delay(attempt: int, retries: int, elapsed_s: float, period_s: float, first_s: float = FIRST_RETRY_S) -> float | None:
    """The wait before retry ``attempt`` (1 for the first): ``first_s``, doubling each time; None
    once ``retries`` are spent or when the retry would start after the next round is due (a
    retry never pushes into the next round's slot: rounds do not overlap)."""
    if attempt > retries:
        return None
    delay = first_s * 2 ** (attempt - 1)
    return delay if elapsed_s + delay < period_s else None
