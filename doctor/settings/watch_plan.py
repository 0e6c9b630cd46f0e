"""How ``watch`` repeats (``WatchPlan``): its period, rounds, address, history and retries, and
the canary beside its target, checked before the first round."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from doctor.foundation.errors import UsageError
from doctor.foundation.user_paths import check_output_folder
from doctor.settings.values import MAX_EVERY_S, checked_url, seconds


@dataclass(frozen=True)
class WatchPlan:
    """How ``watch`` repeats: the period, how many rounds (None: until SIGTERM), where it serves
    and keeps, how often a down target is retried within a round, and the canary beside the target."""

    every_s: float
    count: int | None = None
    listen: tuple[str, int] | None = None
    history: Path | None = None
    keep: int = 100
    retries: int = 3
    canary_engine: str | None = None
    canary_gateway: str | None = None

    @property
    def canary(self) -> bool:
        return bool(self.canary_engine or self.canary_gateway)


def build_watch_plan(every: str, count: int | None, listen: str | None, history: Path | None, keep: int, *,
                     retries: int = WatchPlan.retries, canary_engine: str | None = None,
                     canary_gateway: str | None = None) -> WatchPlan:
    """Checked before the first round: a bad period, count, address, retention or canary URL is a usage error."""
    if count is not None and count < 1:
        raise UsageError(f"--count must be at least 1, got {count}")
    if keep < 1:
        raise UsageError(f"--keep must be at least 1, got {keep}")
    if retries < 0:
        raise UsageError(f"--retries must be 0 or more, got {retries}")
    address = None
    if listen is not None:
        host, sep, port = listen.rpartition(":")
        if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise UsageError(f"--listen expects HOST:PORT with a port in 1-65535, got {listen!r}")
        address = (host.strip("[]"), int(port))
    check_output_folder(history, "--history")
    return WatchPlan(every_s=seconds(every, "--every", MAX_EVERY_S), count=count, listen=address, history=history, keep=keep,
                     retries=retries, canary_engine=checked_url(canary_engine, "--canary-engine"),
                     canary_gateway=checked_url(canary_gateway, "--canary-gateway"))
