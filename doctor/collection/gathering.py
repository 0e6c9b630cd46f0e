"""What the collector's steps share: one run's state (``Gathering``), a step's record (``Step``), a phase.

A ``Step`` says what it is called, what it reads (its ``target``, from the plan, or None when the run
was not asked for it), how the run's ``--deadline`` bounds it and which ``Bundle`` field its evidence
fills; ``Step.__call__`` is the guard every probe runs under, written once: skip a step not asked
for, refuse one the deadline left no time for (an ``EvidenceError`` of kind ``deadline``), say what
it does, and turn a probe that crashes into an ``internal`` evidence error. A Ctrl-C is never
caught here: the collector keeps what was gathered. Lighthouse declares its gatherers and gather
phases the same way, so that the order is a list to read, not control flow to follow.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from doctor.evidence import Bundle, EvidenceError
from doctor.foundation.clock import Clock
from doctor.probes.deadlines import RunDeadline
from doctor.probes.plan import CollectConfig

if TYPE_CHECKING:
    from doctor.probes import gpu_xid, metrics, otlp, router

Progress = Callable[[str], None]
#: What a probe returns: its evidence and the errors met while taking it.
Found = tuple[Any, list[EvidenceError]]


def describe(exc: BaseException) -> str:
    """``Type: message`` of the exceptions that caused ``exc``, inside any exception groups.

    An ``ExceptionGroup`` (anyio's task groups raise them) says only "unhandled errors in a
    TaskGroup"; the user needs the cause it wraps, e.g. ``OverflowError: port must be 0-65535``.
    Duck-typed on ``.exceptions`` so the ``exceptiongroup`` backport on Python 3.10 unwraps too.
    """
    inner = getattr(exc, "exceptions", None)
    if isinstance(inner, (list, tuple)) and inner:
        return "; ".join(describe(e) for e in inner)
    return f"{type(exc).__name__}: {exc}"


@dataclass
class Gathering:
    """One ``collect`` run while its steps run: the plan (replaced, never changed, when the endpoints
    name the model or a hung target), the bundle being filled, the run's deadline, and the watchers
    that span the stream: started before it, their results read last, after a Ctrl-C too."""

    config: CollectConfig
    bundle: Bundle
    run: RunDeadline
    clock: Clock
    say: Progress
    metrics_url: str | None = None  # the /metrics the scraper reads, once chosen
    scraper: metrics.Scraper | None = None
    watch: router.RouterWatch | None = None
    xids: gpu_xid.XidWatcher | None = None
    receiver: otlp.Receiver | None = None
    stream_s: float | None = None  # what the stream probe was granted of the run
    started: set[str] = field(default_factory=set)  # the steps begun, by name

    def keep(self, found: Found | None) -> Any:
        """The evidence of ``found``, its errors added to the bundle's; None for a step that crashed."""
        if found is None:
            return None
        evidence, errors = found
        self.bundle.errors.extend(errors)
        return evidence

    def guarded(self, source: str, target: str, action: str, fn: Callable[[], Found | None]) -> Any:
        """``fn``'s evidence kept; an unexpected exception becomes an ``internal`` evidence error."""
        try:
            found = fn()
        except KeyboardInterrupt:
            raise
        except Exception as exc:  # noqa: BLE001 - a probe bug must cost its evidence, not the run
            self.bundle.errors.append(EvidenceError(source, target, action, "internal", describe(exc), fatal=True))
            return None
        return self.keep(found)

    def give(self, step: str, own_s: float) -> float:
        """What ``step`` may take: min(``own_s``, what is left of the run), recorded in the run record."""
        given = self.run.grant(own_s)
        self.bundle.run.steps[step] = max(0.0, given)
        return given

    def granted(self, step: str, own_s: float, source: str, target: str, action: str) -> float | None:
        """``give``; None, and an evidence error saying so, when the run's time ran out before ``step``."""
        given = self.give(step, own_s)
        if given > 0:
            return given
        self.bundle.errors.append(EvidenceError(source, target, action, "deadline", self.run.spent(action), fatal=True))
        return None


Seconds = Callable[[CollectConfig], float]


@dataclass(frozen=True)
class Step:
    """One probe step, declared: its ``name`` (its entry in ``RunRecord.steps`` when the deadline
    bounds it), the ``source`` and ``action`` its errors name, and:

    - ``target``: what it reads, from the plan and what earlier steps found; None: not asked for;
    - ``take``: the probe call, given the target and the seconds granted (None when unbounded);
      it returns the evidence and its errors, or None when it leaves them elsewhere;
    - ``writes``: the ``Bundle`` field its evidence fills (None: it fills none);
    - ``line``: the progress line said before it runs;
    - ``grant_s``: its own timeout; with none of the run left it is not started (a ``deadline`` error);
    - ``give_s``: its own timeout, cut to what is left; the probe records a lack of time itself.
    """

    name: str
    source: str
    action: str
    target: Callable[[Gathering], str | None]
    take: Callable[[Gathering, str, float | None], Found | None]
    writes: str | None = None
    line: Callable[[Gathering, str], str] | None = None
    grant_s: Seconds | None = None
    give_s: Seconds | None = None

    def __call__(self, g: Gathering) -> None:
        """The guard, once for every step: not asked, out of time, or run and kept."""
        target = self.target(g)
        if target is None:
            return
        seconds = None
        if self.grant_s is not None and (seconds := g.granted(self.name, self.grant_s(g.config), self.source, target, self.action)) is None:
            return
        g.started.add(self.name)
        if self.line is not None:
            g.say(self.line(g, target))
        if self.give_s is not None:
            seconds = g.give(self.name, self.give_s(g.config))
        evidence = g.guarded(self.source, target, self.action, lambda: self.take(g, target, seconds))
        if self.writes is not None:
            setattr(g.bundle, self.writes, evidence)


@dataclass(frozen=True)
class Phase:
    """Steps run in their order. ``gate``: a step that must be taken first (the stream's grant of the
    run), else the phase is skipped. A plain function among the steps decides the plan from what
    the steps before found: it is not guarded, so its ``UsageError`` (the user's setting) stops the run."""

    name: str
    steps: tuple[Callable[[Gathering], None], ...]
    gate: Step | None = None

    def __call__(self, g: Gathering) -> None:
        if self.gate is not None:
            self.gate(g)
            if self.gate.name not in g.started:
                return
        for step in self.steps:
            step(g)
