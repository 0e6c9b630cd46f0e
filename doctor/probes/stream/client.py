"""The client stack the stream probe runs on: its event loop, TLS context and the name both go by.

Kept apart from the run and the requests because every process that reads streams (the probe's
own and each client worker of ``doctor.probes.shard``) starts here, and ``ClientHealth`` names
the stack, since it bounds what the client's own overhead can be.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine
from typing import Any

import httpx

from doctor.probes.plan import CollectConfig
from doctor.probes.transport import ssl_context


def _uvloop() -> Any:
    """uvloop when it is installed (an optional dependency), else None."""
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop if hasattr(uvloop, "run") else None  # uvloop.run: 0.18 and later


def run_loop(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run on uvloop when it is installed (it cuts the client's CPU per chunk by a third), else asyncio."""
    uvloop = _uvloop()
    return uvloop.run(coro) if uvloop is not None else asyncio.run(coro)


def loop_name() -> str:
    """The event loop the probe runs on, for ``ClientHealth`` (it bounds the client's overhead)."""
    return "uvloop" if _uvloop() is not None else "asyncio"


def transport_name() -> str:
    """The client stack, for ``ClientHealth.transport``."""
    return f"httpx {httpx.__version__} + h11, reads stamped in data_received, {loop_name()}"


def tls_context(config: CollectConfig) -> ssl.SSLContext:
    """The probe's TLS context: loading the trust store costs tens of ms of CPU, so only when a target needs TLS."""
    https = any(url.lower().startswith("https:") for url in config.probed().values())
    return ssl_context(config.http.verify if https else False)
