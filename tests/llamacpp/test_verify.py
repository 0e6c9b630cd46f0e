"""``llm-doctor verify``'s answers gate on two real llama.cpp ``llama-server`` processes serving
the same tiny GGUF model: the second engine of issue 31's tests.

llama-server scores no given tokens (its ``n_probs`` covers only the tokens it generates, and it
answers a request carrying vLLM's ``prompt_logprobs`` without them), so teacher-forced scoring is
"not available on this engine", said once, and the structural checks alone decide: the same
weights pass.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from tests.llamacpp.server import serve_llamacpp

pytestmark = pytest.mark.llamacpp

#: One slot each (one answer at a time: nothing batched differently between the two), and room for
#: the built-in long-context prompts.
ARGS = ["-np", "1", "-c", "4096"]


def test_the_same_weights_pass_on_the_structural_checks_alone(tiny_gguf, tmp_path):
    with serve_llamacpp(tiny_gguf, tmp_path / "base.log", ARGS) as base, \
            serve_llamacpp(tiny_gguf, tmp_path / "same.log", ARGS) as same:
        result = CliRunner().invoke(app, ["verify", "--baseline", base, "--candidate", same, "--no-latency",
                                          "--json", str(tmp_path / "same.json")])
    print(result.output)
    answers = json.loads((tmp_path / "same.json").read_text())["answers"]
    assert answers["decision"] == "PASS" and result.exit_code == 0, result.output
    assert "not available on this engine" in (answers["teacher_forced"]["unavailable"] or ""), answers["teacher_forced"]
    assert "the structural checks alone decide" in result.output
