"""Fixtures of the llama.cpp stage: the tiny GGUF model (written once per session) and servers.

The stage runs only when asked for by name (``-m llamacpp``; a ``-m`` given for another reason
replaces the default ``-m "not realvllm and not llamacpp"`` and must not pull it in). Where it was
asked for but ``.ci/llamacpp-setup`` has not run, it skips with the reason, or fails where
``LLM_DOCTOR_REQUIRE_SYSTEM=1`` says every real part must be there (CI).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.llamacpp.server import build_tiny_model, missing_reason, serve_llamacpp
from tests.support import system
from tests.support.served import skip_unless_selected


@pytest.fixture(scope="session")
def tiny_gguf(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    skip_unless_selected(request, "llamacpp")
    if reason := missing_reason():
        system.missing(reason)  # a skip here, a failure in CI (LLM_DOCTOR_REQUIRE_SYSTEM=1)
    return build_tiny_model(tmp_path_factory.mktemp("tiny-gguf") / "tiny.gguf")


@pytest.fixture
def start_llamacpp(tiny_gguf: Path, tmp_path: Path) -> Iterator[Callable[[list[str]], str]]:
    """A factory: ``start_llamacpp(server_args)`` serves the tiny model until the test ends; gives its URL."""
    with ExitStack() as stack:
        yield lambda server_args: stack.enter_context(serve_llamacpp(tiny_gguf, tmp_path / "llama-server.log",
                                                                     server_args))
