"""The kernel's own receive and transmit times of a TCP socket's bytes (Linux ``SO_TIMESTAMPING``).

A token stamped when Python reads it carries the event loop's delay: at 64 streams on one core
a read waits 5-6 ms for the loop, at 256 up to 60 ms (issue 35). The kernel stamps every segment
as it reaches the host, whatever the loop is doing, and ``recvmsg`` hands that stamp over with
the bytes as ancillary data; it stamps what leaves too, and queues those stamps on the socket's
error queue, keyed by the byte they follow (``SOF_TIMESTAMPING_OPT_ID``).

What a TCP receive stamp means: the kernel merges segments that wait in the receive queue and
keeps the newest one's stamp, so a ``recvmsg`` is stamped with the arrival of the LAST byte it
returns (checked by ``tests/probes/test_kernel_stamps.py``). When the loop keeps up, a read is
one segment and its stamp is exact; a read that took several events because the loop was late
stamps them all at the last one's arrival, which is still no later than the loop's own stamp.

Python's socket module does not name these constants (3.11), so they are written here, with the
values of Linux's generic socket ABI (``include/uapi/asm-generic/socket.h``), which every
architecture the probe is used on shares; ``supported()`` keeps them to Linux on those
architectures and to a 64-bit ``struct timespec``. Everywhere else, or when the kernel refuses
the option, the probe stamps with the event loop, as before, and says so per request.
"""

from __future__ import annotations

import platform
import socket
import struct
import sys

SO_TIMESTAMPING = getattr(socket, "SO_TIMESTAMPING", 37)
SCM_TIMESTAMPING = SO_TIMESTAMPING
SOF_TIMESTAMPING_TX_SOFTWARE = 1 << 1
SOF_TIMESTAMPING_RX_SOFTWARE = 1 << 3
SOF_TIMESTAMPING_SOFTWARE = 1 << 4
SOF_TIMESTAMPING_OPT_ID = 1 << 7
SOF_TIMESTAMPING_OPT_TSONLY = 1 << 11
#: Software stamps of every segment received and of the last byte of every send, keyed by byte count.
FLAGS = (SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_TX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE
         | SOF_TIMESTAMPING_OPT_ID | SOF_TIMESTAMPING_OPT_TSONLY)
MSG_ERRQUEUE = getattr(socket, "MSG_ERRQUEUE", 0x2000)
SO_EE_ORIGIN_TIMESTAMPING = 4
#: ``struct scm_timestamping``: three ``struct timespec`` (software, deprecated, hardware).
_TIMESPEC = struct.Struct("qq")
#: ``struct sock_extended_err``: errno, origin, type, code, pad, info, data (the byte count).
_EXTENDED_ERR = struct.Struct("IBBBBII")
#: Room for the stamp and the extended error (with its address) of one message.
ANCILLARY = socket.CMSG_SPACE(3 * _TIMESPEC.size) + socket.CMSG_SPACE(_EXTENDED_ERR.size + 32) if hasattr(socket, "CMSG_SPACE") else 0
_GENERIC_ABI = {"x86_64", "amd64", "aarch64", "arm64", "ppc64le", "s390x", "riscv64", "loongarch64"}


def supported() -> bool:
    """Linux on an architecture of the generic socket ABI, with ``recvmsg`` and a 64-bit ``timespec``."""
    return (sys.platform.startswith("linux") and platform.machine().lower() in _GENERIC_ABI
            and hasattr(socket.socket, "recvmsg") and ANCILLARY > 0 and struct.calcsize("l") == 8)


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp ``sock``'s receives and sends; False where it cannot (the loop's clock then).

    Call it once connected and before the first write: the transmit stamps count bytes from here.
    """
    if not supported() or sock.type != socket.SOCK_STREAM:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, FLAGS)
    except OSError:
        return False
    return True


def receive_stamp(ancillary: list[tuple[int, int, bytes]]) -> int | None:
    """The kernel's receive time (``CLOCK_REALTIME`` ns) in a ``recvmsg``'s ancillary data, if any."""
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPING and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            if sec or nsec:
                return sec * 1_000_000_000 + nsec
    return None


def sent_stamps(sock: socket.socket) -> list[tuple[int, int]]:
    """Drain ``sock``'s error queue: ``(byte count, CLOCK_REALTIME ns)`` of each send stamped since.

    The count is that of the last byte the send held, from 0 at ``enable``; it never blocks.
    Raises ``OSError`` for a socket error other than an empty queue.
    """
    out: list[tuple[int, int]] = []
    while True:
        try:
            _, ancillary, _, _ = sock.recvmsg(0, ANCILLARY, MSG_ERRQUEUE)
        except (BlockingIOError, InterruptedError):
            return out
        stamp, key = None, None
        for level, kind, data in ancillary:
            if level == socket.SOL_SOCKET and kind == SCM_TIMESTAMPING and len(data) >= _TIMESPEC.size:
                sec, nsec = _TIMESPEC.unpack_from(data)
                stamp = sec * 1_000_000_000 + nsec
            elif level in (socket.IPPROTO_IP, socket.IPPROTO_IPV6) and len(data) >= _EXTENDED_ERR.size:
                _, origin, _, _, _, _, count = _EXTENDED_ERR.unpack_from(data)
                if origin == SO_EE_ORIGIN_TIMESTAMPING:
                    key = count
        if stamp is not None and key is not None:
            out.append((key, stamp))


_KEEPER: list[socket.socket] = []


def keep_on() -> None:
    """Turn the kernel's receive stamping on for the host before the first request, and keep it on.

    The kernel stamps received packets only while some socket asks for it, and turns that on a
    moment after the first one asks (deferred work): the first reads of a run would come without
    a stamp. One idle UDP socket that asks, held for the process's life, makes it so from the start.
    """
    if _KEEPER or not supported():
        return
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE)
    except OSError:
        sock.close()
        return
    _KEEPER.append(sock)
