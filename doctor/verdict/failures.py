"""Which paths failed, as counts: requests that failed the target, the paths that did, and those that mostly did.

Requests that were no failure of the target (cancelled by an interrupt, lost to a freeze of the
client itself) are left out: ``NOT_THE_TARGETS``. A path is failing when at least
``FAILING_SHARE`` of its measured requests failed; the decision never calls such a path healthy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from doctor.derive.stream_stats import PathStats, StreamStats
from doctor.evidence.stream import NOT_THE_TARGETS, RequestTrace

if TYPE_CHECKING:
    from doctor.evidence import StreamEvidence

#: A path is failing when at least this share of its measured requests failed.
FAILING_SHARE = 0.5


@dataclass
class Failing:
    """A path most of whose requests failed: how many, its commonest failure (``outcome`` x
    ``count``) and the first request that failed so (its status or error), when the bundle has it."""

    path: str
    failed: int
    total: int
    outcome: str
    count: int
    first: RequestTrace | None


@dataclass
class Tally:
    """The failing paths, every path with a failure (``failed_paths``, the failing ones among them),
    and the failed and measured requests over every path."""

    failing: dict[str, Failing]
    failed: int = 0
    measured: int = 0
    failed_paths: dict[str, Failing] = field(default_factory=dict)


def failures_of(ps: PathStats) -> dict[str, int]:
    """The path's failures by outcome, without the requests that were no failure of the target
    (cancelled by an interrupt, lost to a freeze of the client)."""
    return {outcome: n for outcome, n in ps.failures.items() if outcome not in NOT_THE_TARGETS}


def tally(stats: StreamStats | None, stream: StreamEvidence | None) -> Tally:
    """Count every path's failures, and name the failing ones."""
    out = Tally({})
    for name, ps in (stats.paths.items() if stats is not None else ()):
        failures = failures_of(ps)
        n_failed = sum(failures.values())
        out.failed += n_failed
        out.measured += ps.n_ok + n_failed
        if not n_failed:
            continue
        outcome, n = max(failures.items(), key=lambda kv: kv[1])
        first = next((r for r in (stream.requests if stream else []) if r.path == name and r.outcome == outcome), None)
        out.failed_paths[name] = Failing(name, n_failed, ps.n_ok + n_failed, outcome, n, first)
        if n_failed >= FAILING_SHARE * (ps.n_ok + n_failed):
            out.failing[name] = out.failed_paths[name]
    return out
