"""Run a real ``vllm serve`` (the CPU build in ``.venv-vllm``) as the test's own process.

Each server listens on a free port of 127.0.0.1, writes stdout and stderr to its own log file
(so the test can hand it to ``llm-doctor --log``), and runs in its own process group, which is
always terminated on exit: the API server, the engine core and its workers go together.

Facts from a trial on this kind of machine (issue "lab", part 4) shape the defaults: the CPU
build cannot infer its platform from the ``vllm`` dist-info stub the setup script adds, so
``VLLM_TARGET_DEVICE=cpu`` says it; the default ``--gpu-memory-utilization 0.92`` fails at start,
so the KV cache is sized in bytes; vLLM recommends tcmalloc in ``LD_PRELOAD`` on CPU; start-up
takes 45-100 s on 2 cores (mostly compilation), longer when the cores are shared.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.support.nginx import free_port
from tests.support.served import stop_group, wait_healthy, write_model

ROOT = Path(__file__).resolve().parents[2]
VLLM_VENV = Path(os.environ.get("VLLM_VENV", ROOT / ".venv-vllm"))
VLLM_BIN = VLLM_VENV / "bin" / "vllm"
VLLM_PYTHON = VLLM_VENV / "bin" / "python"
TCMALLOC = Path("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4")  # Debian's libtcmalloc-minimal4

SERVED_NAME = "tiny"
MAX_MODEL_LEN = 1024
STARTUP_TIMEOUT_S = 600.0  # 45-100 s on 2 idle cores; other work on the machine stretches it
#: The engine and the incident's users run below llm-doctor's priority. On a GPU server the model
#: runs on the GPU, and the probing client has the CPU it needs; here the engine's matmuls and the
#: users' clients take both cores, and CI's machine starved the diagnosing process under them: a
#: diagnosis that streamed its requests on time then spent minutes importing and analysing (the
#: queueing incident ran past 600 s on CI, 64 s here beside three CPU hogs). Niced, the engine still does the same work
#: and the incident is the same; the probe's own CPU, a few per cent of a core, comes first.
BELOW_THE_PROBE = ["nice", "-n", "10"]
#: Left to itself ('auto'), the CPU build reserves the last core for its scheduler and binds every
#: server's model to core 0: two servers serving at once (the eval gate's baseline and candidate)
#: share one core while the other idles, and on CI the gate's candidate then answered nothing within
#: 120 s to five prompts. Such a test gives each server its ``core``; the others keep 'auto', under
#: which their verdicts were calibrated.


def skip_reason() -> str | None:
    """Why this machine cannot run the stage, or None when it can."""
    flags = Path("/proc/cpuinfo").read_text(errors="replace").split() if Path("/proc/cpuinfo").exists() else []
    if "avx2" not in flags and "avx512f" not in flags:
        return "this CPU has neither AVX2 nor AVX-512: the CPU build of vLLM cannot run here"
    if not VLLM_BIN.exists():
        return f"{VLLM_BIN} is missing: run .ci/realvllm-setup to install the CPU build of vLLM"
    return None


def build_tiny_model(out: Path) -> Path:
    """The random-weight Llama of ``tiny_model.py``, built with the vLLM venv's Python (it has torch)."""
    return write_model(VLLM_PYTHON, "tests.realvllm.tiny_model", out, ROOT)


@dataclass
class VllmServer:
    url: str  # http://127.0.0.1:PORT
    log: Path  # the server's stdout and stderr
    pid: int = 0  # the API server process (``vllm serve``); its engine core is a child process
    core: int | None = None  # the CPU its model runs on (``VLLM_CPU_OMP_THREADS_BIND``); None: vLLM's 'auto'


def _env() -> dict[str, str]:
    # The model and its adapters are local directories and these machines reach no model hub:
    # offline, nothing in vLLM or transformers waits on a lookup that cannot succeed.
    env = {**os.environ, "VLLM_TARGET_DEVICE": "cpu", "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}
    if TCMALLOC.exists():
        env["LD_PRELOAD"] = ":".join(p for p in (str(TCMALLOC), env.get("LD_PRELOAD", "")) if p)
    return env


@contextlib.contextmanager
def serve_vllm(model: Path, log: Path, engine_args: list[str], env: dict[str, str] | None = None,
               core: int | None = None) -> Iterator[VllmServer]:
    """``vllm serve MODEL --max-model-len 1024 --served-model-name tiny ENGINE_ARGS`` until exit,
    with ``env`` over its environment (``OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`` for tracing), its
    model on ``core`` where given (``VLLM_CPU_OMP_THREADS_BIND``; else vLLM's own 'auto').

    ENGINE_ARGS may give its own ``--max-model-len`` (a long-prompt scenario needs more than 1024);
    ``{model_dir}`` in one of them is the model's directory (its LoRA adapters lie there).
    """
    port = free_port()
    length = [] if "--max-model-len" in engine_args else ["--max-model-len", str(MAX_MODEL_LEN)]
    args = [*length, "--served-model-name", SERVED_NAME, *(a.replace("{model_dir}", str(model)) for a in engine_args)]
    cmd = [*BELOW_THE_PROBE, str(VLLM_BIN), "serve", str(model), "--host", "127.0.0.1", "--port", str(port), *args]
    bind = {} if core is None else {"VLLM_CPU_OMP_THREADS_BIND": str(core)}
    env = {**_env(), **bind, **(env or {})}
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=env, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(proc, url, log, "vllm serve", STARTUP_TIMEOUT_S)
        yield VllmServer(url=url, log=log, pid=proc.pid, core=core)
    finally:
        stop_group(proc)
