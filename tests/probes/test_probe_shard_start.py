"""Client workers that cannot start (``doctor.probes.shard.ShardPool.start``): every failure of the
start, not only an ``OSError``, is a ``ShardError`` that names what failed, with no worker left
running, so that the probe goes on in one process and says why (``doctor.probes.stream.run``).

Real failures of ``multiprocessing``'s ``spawn``, no mock of the pool: arguments that do not pickle
(the parent pickles them before the child exists), one that fails only after a first worker has
started, and a daemonic process, which may not have children (a worker of ``multiprocessing.Pool``
or of Celery's prefork pool running the probe).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import socket
import threading
from typing import Any

import psutil
import pytest

from doctor.probes.shard import ShardError, ShardPool
from tests.probes.test_probe_shard_diagnosis import diagnosis_read_by_one_process


def idle(sock: socket.socket, _shard: int, _workers: int, *_args: Any) -> None:
    """A worker that waits for the parent's end to close (never says it is ready)."""
    sock.recv(1)


class PicklesOnce:
    """Pickles for the first worker, then fails as an unpicklable value does: a start that fails
    after one worker is already running."""

    pickled = 0

    def __reduce__(self) -> tuple[type, tuple[()]]:
        PicklesOnce.pickled += 1
        if PicklesOnce.pickled > 1:
            raise TypeError("cannot pickle 'PicklesOnce' object a second time")
        return PicklesOnce, ()


def _workers_alive() -> list[psutil.Process]:
    return [child for child in psutil.Process().children(recursive=True) if child.is_running() and child.status() != psutil.STATUS_ZOMBIE
            and "multiprocessing.spawn" in " ".join(child.cmdline())]


def _start(args: tuple[Any, ...], workers: int = 2) -> ShardError:
    pool = ShardPool(workers, idle, args, on_done=lambda _payload: None)
    with pytest.raises(ShardError) as caught:
        asyncio.run(pool.start(timeout_s=30))
    return caught.value


def test_arguments_that_do_not_pickle_are_a_shard_error_that_names_the_failure() -> None:
    error = _start((threading.Lock(),))
    assert str(error) == "cannot start 2 client worker processes (TypeError: cannot pickle '_thread.lock' object)"
    assert isinstance(error.__cause__, TypeError)  # the original kept for whoever debugs it
    assert _workers_alive() == []


def test_a_start_that_fails_after_the_first_worker_stops_that_worker_again() -> None:
    PicklesOnce.pickled = 0
    error = _start((PicklesOnce(),), workers=3)
    assert PicklesOnce.pickled == 2  # the first worker was spawned, the second failed to pickle
    assert "(TypeError: cannot pickle 'PicklesOnce' object a second time)" in str(error)
    assert _workers_alive() == []


def test_workers_that_a_daemonic_process_cannot_start_leave_the_diagnosis_to_one_process(monkeypatch) -> None:
    monkeypatch.setattr(multiprocessing.current_process(), "daemon", True)  # as in a multiprocessing.Pool worker
    error = diagnosis_read_by_one_process()
    assert error.message == ("cannot start 2 client worker processes (AssertionError: daemonic processes are not allowed "
                             "to have children): the streams were read by one process")
