"""The read timeout of the probe's stamping transport: one timer per connection, moved lazily
(``doctor.probes.transport._Stream._arm``), must time out exactly the reads the per-read timer did.

Against a real socket: a server that sends a piece every ``GAP`` seconds and then falls silent. The
timeout is longer than a gap but shorter than three, so a timer left at the first read's deadline
would fail a read of the trickle; every piece must be read, then the silence must time out.
"""

from __future__ import annotations

import asyncio

import httpcore

from doctor.probes.transport import _StampingBackend

GAP, TIMEOUT, PIECES = 0.05, 0.15, 6


async def _trickle_then_silence(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    for k in range(PIECES):
        writer.write(b"piece %d;" % k)
        await writer.drain()
        await asyncio.sleep(GAP)
    await asyncio.sleep(TIMEOUT * 20)  # silent, connection open
    writer.close()


async def _read_all(loop_timeout: float) -> tuple[bytes, BaseException | None]:
    server = await asyncio.start_server(_trickle_then_silence, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    stream = await _StampingBackend().connect_tcp("127.0.0.1", port, timeout=5)
    got, error = b"", None
    try:
        while True:
            data = await stream.read(65536, timeout=loop_timeout)
            if not data:
                break
            got += data
    except httpcore.ReadTimeout as exc:
        error = exc
    finally:
        await stream.aclose()
        server.close()
    return got, error


def test_a_trickle_longer_than_the_timeout_is_read_whole_and_the_silence_after_it_times_out():
    got, error = asyncio.run(_read_all(TIMEOUT))
    assert got == b"".join(b"piece %d;" % k for k in range(PIECES))
    assert isinstance(error, httpcore.ReadTimeout)
    assert str(error) == f"no progress for {TIMEOUT:g} s"


def test_without_a_timeout_a_read_waits_for_the_close():
    async def closes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(GAP * 4)
        writer.close()

    async def run() -> bytes:
        server = await asyncio.start_server(closes, "127.0.0.1", 0)
        stream = await _StampingBackend().connect_tcp("127.0.0.1", server.sockets[0].getsockname()[1], timeout=5)
        got = b""
        while data := await stream.read(65536, timeout=None):
            got += data
        await stream.aclose()
        server.close()
        return got

    assert asyncio.run(run()) == b"x"
