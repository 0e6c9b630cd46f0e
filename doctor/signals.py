"""SIGTERM handled exactly like Ctrl-C (SIGINT).

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
    """Route SIGTERM to the SIGINT handler (main thread only; signals are delivered there)."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _as_sigint)
