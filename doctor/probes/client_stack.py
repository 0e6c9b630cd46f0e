"""The client stack the stream probe runs on: its event loop, TLS context and the name both go by.

Kept apart from the run and the requests because every process that reads streams (the probe's
own and each client worker of ``doctor.probes.shard``) starts here, and the endpoints probe's
scheme question too: beside the stream package, not in it, so that package needs the wire-level
modules and none of them needs it back, and ``ClientHealth`` names
the stack, since it bounds what the client's own overhead can be.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Coroutine
from typing import Any

import httpx

from doctor.probes import kernel_stamps
from doctor.probes.plan import CollectConfig
from doctor.probes.transport import ssl_context


def _uvloop() -> Any:
    """uvloop when it is installed (an optional dependency) and the kernel does not stamp the reads,
    else None.

    With kernel stamps the probe polls raw sockets itself (``doctor.probes.transport``), and under
    uvloop such a socket's reader sometimes never woke: the run's first GET waited out the deadline
    and nothing was sent (2 of 6 runs here; asyncio's loop: 0 of 6). Correct stamps on asyncio's
    loop before a third less CPU per chunk on uvloop's: the stamps no longer depend on the loop's speed."""
    if kernel_stamps.supported():
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop if hasattr(uvloop, "run") else None  # uvloop.run: 0.18 and later


def run_loop(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run on uvloop when it is installed and the kernel does not stamp the reads (``_uvloop``: it cuts
    the client's CPU per chunk by a third), else asyncio.

    The result comes back through a list, never as the main task's result: as the run ends,
    ``asyncio.Runner`` asks ``signal.getsignal(SIGINT)``, and Python 3.11's lookup of a handler
    that is no signal constant formats an error with its repr, a partial holding the main task,
    whose repr holds its result's: every token and read of the evidence, 150 ms of CPU after a
    run of 256 requests at 64 streams (issue 25).
    """
    result: list[Any] = []

    async def main() -> None:
        result.append(await coro)

    uvloop = _uvloop()
    if uvloop is not None:
        uvloop.run(main())
    else:
        asyncio.run(main())
    return result[0]


def loop_name() -> str:
    """The event loop the probe runs on, for ``ClientHealth`` (it bounds the client's overhead)."""
    return "uvloop" if _uvloop() is not None else "asyncio"


def transport_name() -> str:
    """The client stack, for ``ClientHealth.transport``."""
    stamps = "by the kernel (SO_TIMESTAMPING) on plain HTTP, in data_received on TLS" if kernel_stamps.supported() \
        else "in data_received"
    return f"httpx {httpx.__version__} + h11, reads stamped {stamps}, {loop_name()}"


def tls_context(config: CollectConfig) -> ssl.SSLContext:
    """The probe's TLS context: loading the trust store costs tens of ms of CPU, so only when a target needs TLS."""
    https = any(url.lower().startswith("https:") for url in config.probed().values())
    return ssl_context(config.http.verify if https else False)
