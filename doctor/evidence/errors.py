"""How a failed probe is recorded: as evidence, never as an exception."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EvidenceError:
    """One thing a probe tried that did not work.

    ``source`` is the evidence kind it was gathering (``stream``, ``log``, ``metrics``,
    ``prometheus``, ``endpoints``, ``gpu``, ``host``); ``target`` what it was pointed at
    (a redacted URL or path); ``action`` what it tried; ``kind`` a stable machine-readable
    reason (``connect``, ``dns``, ``tls``, ``timeout``, ``http-status``, ``malformed``,
    ``unreadable``, ``unavailable``, ``cut``, ``internal``, ``client``: the probing client itself
    froze, ``deadline``: not started because the run's ``--deadline`` had run out); ``message``
    the human sentence.
    """

    source: str
    target: str
    action: str
    kind: str
    message: str
    fatal: bool = False  # True when the whole evidence kind is unusable, not just one sample


#: Failure kinds that mean the target was not reached at all (no answer, not a bad one): the
#: endpoints probe stops asking such a target, and ``watch`` calls a path failing only so down.
UNREACHABLE_KINDS = frozenset({"connect", "dns", "tls", "timeout"})
