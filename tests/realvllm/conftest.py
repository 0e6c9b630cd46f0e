"""Fixtures of the real-vLLM stage: the tiny model (built once per session) and vLLM servers.

The whole stage skips, with the reason, where the CPU build of vLLM is not installed
(``.ci/realvllm-setup``) or cannot run (no AVX2 / AVX-512), and unless it was asked for by
name (``-m realvllm``): a ``-m`` given for another reason (``-m "not slow"``) replaces the
default ``-m "not realvllm and not llamacpp"`` and would otherwise pull minutes of vLLM start-up into that run. Servers run one at a time: each
test module starts what it needs and stops it before the next module begins.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.realvllm.server import VllmServer, build_tiny_model, serve_vllm, skip_reason
from tests.support.served import skip_unless_selected


@pytest.fixture(scope="session")
def tiny_model(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    skip_unless_selected(request, "realvllm")
    reason = skip_reason()
    if reason:
        pytest.skip(reason)
    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture
def start_vllm(tiny_model: Path, tmp_path: Path) -> Iterator[Callable[[list[str]], VllmServer]]:
    """A factory: ``start_vllm(engine_args)`` serves the tiny model until the test ends."""
    with ExitStack() as stack:
        yield lambda engine_args: stack.enter_context(serve_vllm(tiny_model, tmp_path / "vllm.log", engine_args))
