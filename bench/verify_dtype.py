"""What the eval gate says of ``--dtype bfloat16`` against ``float32`` on the real vLLM CPU build
(issue 31): two servers of the stage's tiny random-weight model, one per dtype, each on a core of
its own, and ``llm-doctor verify`` between them (answers only: the latency half would measure the
CPU's bf16 kernels, not a deployment).

Usage: ``python bench/verify_dtype.py [--json out.json]`` after ``.ci/realvllm-setup``; a few
minutes on 2 cores. Its result is recorded in docs/verify.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from doctor.cli import app  # noqa: E402
from tests.realvllm.server import build_tiny_model, serve_vllm  # noqa: E402

#: As the stage's verify test serves (room for the long-context prompts, the KV cache in bytes), uncompiled.
ARGS = ["--max-model-len", "4096", "--kv-cache-memory-bytes", "256M", "-O0"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="keep verify's JSON document here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        model = build_tiny_model(work / "tiny")
        out = args.json or work / "verify.json"
        with serve_vllm(model, work / "fp32.log", [*ARGS, "--dtype", "float32"], core=0) as base, \
                serve_vllm(model, work / "bf16.log", [*ARGS, "--dtype", "bfloat16"], core=1) as candidate:
            result = CliRunner().invoke(app, ["verify", "--baseline", base.url, "--candidate", candidate.url,
                                              "--no-latency", "--json", str(out)])
        print(result.output)
        answers = json.loads(out.read_text())["answers"]
        print(json.dumps({k: answers[k] for k in ("decision", "reasons", "teacher_forced")}, indent=1))


if __name__ == "__main__":
    main()
