"""SIGINT as Ctrl-C, whatever was inherited, and SIGTERM handled exactly like it.

A process started in the background of a non-interactive shell (``cmd &`` in a script, cron's
``sh -c``, ``nohup``) inherits SIGINT as *ignored*: Ctrl-C sent to it did nothing, and asyncio,
which takes SIGINT over only from Python's default handler, kept its graceful path off too, so
SIGTERM forwarded here fell back to a bare ``KeyboardInterrupt`` that tore through the event
loop and lost the requests in flight. The CLI puts Python's own handler back first.

``timeout``, cron, systemd and Kubernetes stop a process with SIGTERM, whose default action
kills it at once: exit 143, no report, the probe lost. Forwarding it to whatever handles SIGINT
at that moment (Python's ``KeyboardInterrupt``, or asyncio's handler that cancels the running
probe) gives it the Ctrl-C path: the requests in flight are cancelled, a partial report is
written, and the exit code is 130.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType


def _as_sigint(_signum: int, frame: FrameType | None) -> None:
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)
    else:  # SIG_IGN or SIG_DFL set by an embedding program: stop the way Ctrl-C would by default
        raise KeyboardInterrupt


def terminate_like_interrupt() -> None:
    """Ctrl-C raises ``KeyboardInterrupt`` even where SIGINT was inherited ignored, and SIGTERM is
    routed to the SIGINT handler of the moment (main thread only; signals are delivered there)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, _as_sigint)
