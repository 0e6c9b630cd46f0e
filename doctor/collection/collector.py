"""The collector: run the probes the request needs and assemble one redacted ``Bundle``.

Order matters for what it measures: machine and endpoint facts first (they name the model and
the engine process), a /metrics scrape right before the stream probe, background scrapes during
it and a watch for GPU XID errors over it, one scrape right after it, then the trace store's
read-back (its wait is not in the scrapes' deltas), the log and Prometheus history (which read the past and add no load). A probe that fails leaves an
``EvidenceError``; a probe that crashes is recorded as an ``internal`` error too, so ``collect``
always returns a bundle, unless the engine's own /v1/models says it would refuse every request
asked for (longer than its ``max_model_len``): that is the user's setting, a ``UsageError``
raised before the first request. Ctrl-C keeps what was gathered: the stream probe's requests so far, the
scrapes and XID errors so far, and the startup log (a local read that sends nothing); the bundle
is marked ``interrupted``.

The whole run ends by ``--deadline`` (``doctor.probes.deadlines.RunDeadline``): each network step
is given ``min(its own timeout, what is left)`` (recorded in ``RunRecord.steps``), and one with
nothing left is not started but recorded as an ``EvidenceError`` of kind ``deadline``, the
partial bundle still written. What follows the deadline is local: the startup log, the model
config, and the report (docs/probe.md measures that grace). A target that accepted the endpoints
probe's GET and sent not a byte in its whole ``--timeout`` is hung: its own /metrics is not scraped
and the stream probe holds its requests' heads to a short bound (``CollectConfig.silent``), so the
run says so in about 20 s instead of a stall timeout per request and a timeout per scrape.

The steps are declared in ``doctor.collection.phases`` (before, around and after the stream, as
Lighthouse's gather phases), each a record whose guard (not asked for, out of time, crashed) is
written once in ``doctor.collection.gathering.Step``; ``collect`` runs the phases in order.
"""

from __future__ import annotations

from contextlib import suppress
from datetime import datetime, timezone

from doctor import __version__
from doctor.collection.gathering import Gathering, Progress
from doctor.evidence import Bundle
from doctor.foundation.clock import Clock
from doctor.foundation.redact import Redactor, redact_bundle
from doctor.probes.deadlines import RunDeadline
from doctor.probes.plan import CollectConfig

__all__ = ["CollectConfig", "Progress", "collect"]


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _redacting(progress: Progress, secrets: list[str]) -> Progress:
    """Progress lines name URLs and paths the user gave, which may carry credentials."""
    redactor = Redactor(secrets)
    return lambda message: progress(redactor.text(message))


def _new_bundle(config: CollectConfig) -> Bundle:
    """An empty bundle whose run record says what was asked: the command, the targets, the deadline."""
    bundle = Bundle(tool_version=__version__, created_at=_now_iso())
    bundle.run.tool_version = __version__
    bundle.run.command = config.command
    bundle.run.started_at = bundle.created_at
    bundle.run.engine_url = config.engine
    bundle.run.gateway_url = config.gateway
    bundle.run.log_source = config.log
    bundle.run.deadline_s = config.deadline_s
    for key, value in config.run_fields.items():
        if key == "labels":
            bundle.run.labels.update(value)
        else:
            setattr(bundle.run, key, value)
    return bundle


def collect(config: CollectConfig, progress: Progress = lambda _msg: None) -> Bundle:
    """Run the probes and return the redacted bundle (partial, with ``interrupted``, on Ctrl-C)."""
    from doctor.collection.phases import FINISH, ON_INTERRUPT, PHASES, RECORD  # loads every probe: only when collecting

    say = _redacting(progress, config.secrets())
    clock = Clock()
    run = RunDeadline(config.deadline_s)
    g = Gathering(config, _new_bundle(config), run, clock, say)
    try:
        for phase in PHASES:
            phase(g)
    except KeyboardInterrupt:
        g.bundle.interrupted = True
        g.say("interrupted: writing what was gathered")
        with suppress(KeyboardInterrupt):  # worth the moment each takes; a second Ctrl-C skips them
            for step in ON_INTERRUPT:
                if step.name not in g.started:
                    step(g)
    finally:
        for step in FINISH:
            step(g)
    g.bundle.run.ended_at = _now_iso()
    RECORD(g)
    return redact_bundle(g.bundle, g.config.secrets())
