"""Whether a URL's host is this machine: the one rule for every "same host" question.

Two questions need it: the host probe looks for the engine's process only when the engine URL
names this machine (``doctor.probes.host``), and the settings warn when ``--engine`` and
``--gateway`` are the same server (``doctor.settings.values.same_place``). Each once had its own
rule (one knew ``.localhost`` names, the other ``localhost.localdomain``, ``0.0.0.0`` and this
machine's own addresses), so the same URL could be local to one and remote to the other.
"""

from __future__ import annotations

import ipaddress
import socket

import psutil

#: Names that always mean this machine (RFC 6761 makes every ``*.localhost`` loopback too).
LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "localhost6", "localhost6.localdomain6"})

#: What ``host_key`` calls every spelling of this machine.
THIS_HOST = "this-host"


def is_this_host(host: str) -> bool:
    """Whether ``host`` (a URL's host, any case, without brackets) names this machine: a local name,
    ``*.localhost``, this machine's host name, a loopback or unspecified address (``127.0.0.0/8``,
    ``::1``, ``0.0.0.0``, ``::``), or an address of one of its interfaces. Another name is never
    resolved: that could block, and a remote engine is the common case."""
    host = host.lower().strip("[]")
    if not host:
        return False
    if host in LOCAL_NAMES or host.endswith(".localhost") or host == socket.gethostname().lower():
        return True
    try:
        address = ipaddress.ip_address(host.split("%")[0])
    except ValueError:
        return False
    if address.is_loopback or address.is_unspecified:
        return True
    return str(address) in _own_addresses()


def host_key(host: str) -> str:
    """``host`` as a comparison key: ``THIS_HOST`` for every spelling of this machine, else in lower case."""
    return THIS_HOST if is_this_host(host) else host.lower()


def _own_addresses() -> set[str]:
    """The addresses of this machine's interfaces (an IPv6 one without its zone); none when unreadable."""
    try:
        interfaces = psutil.net_if_addrs()
    except (OSError, psutil.Error):
        return set()
    return {a.address.split("%")[0] for addrs in interfaces.values() for a in addrs}
