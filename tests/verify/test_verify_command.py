"""``llm-doctor verify`` end to end against real HTTP servers on 127.0.0.1 (``tests/support/answer_server``):
the same weights pass, perturbed ones fail, and every kind of bad input ends in a sentence, not a traceback."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from doctor.cli import app
from tests.support.answer_server import AnswerServer
from tests.support.nginx import free_port

runner = CliRunner()
FAST = ["--no-latency", "--deadline", "60"]


def verify(*args: str):
    return runner.invoke(app, ["verify", *args])


@pytest.fixture(scope="module")
def baseline():
    with AnswerServer() as server:
        yield server


def test_same_weights_pass_and_perturbed_weights_fail_in_every_format(baseline, tmp_path):
    with AnswerServer() as same, AnswerServer(shift=1.5) as broken:
        ok = verify("--baseline", baseline.url, "--candidate", same.url, *FAST)
        out = tmp_path / "v.json"
        bad = verify("--baseline", baseline.url, "--candidate", broken.url, *FAST, "--json", str(out), "--md", str(tmp_path / "v.md"))
    assert ok.exit_code == 0, ok.output
    assert ok.stdout.startswith("answers: PASS") and "teacher-forced KL per token 0.0000" in ok.output
    assert bad.exit_code == 1 and bad.stdout.startswith("answers: FAIL")
    assert "the mean is above its bar" in bad.output and "tool call changed" in bad.output
    assert "prompts that differ" in bad.output and "first differs at word" in bad.output
    doc = json.loads(out.read_text())
    assert doc["verify_version"] == 1 and doc["exit_code"] == 1 and doc["answers"]["decision"] == "FAIL"
    assert doc["answers"]["teacher_forced"]["kl_mean"] > 10 * doc["answers"]["teacher_forced"]["floor_mean"] + 0.01
    assert len(doc["answers"]["prompts"]) >= 16 and doc["latency"] is None
    markdown = (tmp_path / "v.md").read_text()
    assert "**answers: FAIL**" in markdown and "| prompt |" in markdown


def test_a_small_numerics_change_passes_on_its_scores_though_text_moved(baseline):
    with AnswerServer(shift=0.05) as close:
        result = verify("--baseline", baseline.url, "--candidate", close.url, *FAST, "--format", "json")
    doc = json.loads(result.stdout)
    scored = doc["answers"]["teacher_forced"]
    assert result.exit_code == 0 and doc["answers"]["decision"] == "PASS"
    assert 0 < scored["kl_mean"] < 0.01 and scored["tokens"] >= 200


def test_a_bad_prompts_line_is_named_before_any_request(baseline, tmp_path):
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"messages": [{"role": "user", "content": "hi"}]}\n{"messages": oops}\n')
    before = len(baseline.requests)
    result = verify("--baseline", baseline.url, "--candidate", baseline.url, "--prompts", str(prompts))
    assert result.exit_code == 2 and f"{prompts}:2: not JSON" in result.output
    assert len(baseline.requests) == before and "Traceback" not in result.output


def test_an_unreachable_or_failing_candidate_is_reported(baseline):
    down = verify("--baseline", baseline.url, "--candidate", f"http://127.0.0.1:{free_port()}", *FAST)
    assert down.exit_code == 1 and "no answer: candidate" in down.output and "connect" in down.output
    with AnswerServer(mode="fail") as failing:
        result = verify("--baseline", baseline.url, "--candidate", failing.url, *FAST)
    assert result.exit_code == 1 and "HTTP 500" in result.output and "illegal memory access" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.parametrize("mode, said", [("empty", "empty answer"), ("loop", "self-repeating answer")])
def test_broken_answers_fail_on_structure(baseline, mode, said):
    with AnswerServer(mode=mode) as broken:
        result = verify("--baseline", baseline.url, "--candidate", broken.url, *FAST)
    assert result.exit_code == 1 and said in result.output


def test_recorded_answers_stand_in_for_the_baseline(baseline, tmp_path):
    record = tmp_path / "stable.jsonl"
    saved = verify("--candidate", baseline.url, "--save-answers", str(record), *FAST)
    assert saved.exit_code == 2 and "recorded 54 answers" in saved.output  # 18 prompts x 3, nothing compared
    requests = len(baseline.requests)
    with AnswerServer() as same, AnswerServer(shift=1.5) as broken:
        ok = verify("--baseline-answers", str(record), "--candidate", same.url, *FAST)
        bad = verify("--baseline-answers", str(record), "--candidate", broken.url, *FAST)
    assert len(baseline.requests) == requests  # the recording was read, the baseline not asked
    assert ok.exit_code == 0 and "teacher-forced KL per token 0.0000" in ok.output and str(record) in ok.output
    assert bad.exit_code == 1
    record.write_text(record.read_text() + "{not json\n")
    broken_file = verify("--baseline-answers", str(record), "--candidate", baseline.url, *FAST)
    assert broken_file.exit_code == 2 and f"{record}:56: not JSON" in broken_file.output


def test_an_engine_without_prompt_logprobs_is_said_and_other_models_told_apart(baseline):
    with AnswerServer(mode="nologprobs", model="tiny-model-fp8") as other:
        result = verify("--baseline", baseline.url, "--candidate", other.url, *FAST)
    assert result.exit_code == 0
    assert "not available on this engine" in result.output and "the structural checks alone decide" in result.output
    assert "different models" in result.output and "tiny-model-fp8" in result.output


def test_the_latency_half_judges_the_candidate_as_compare_does(baseline):
    with AnswerServer(ttft=0.25) as slow:
        result = verify("--baseline", baseline.url, "--candidate", slow.url, "--no-answers", "--requests", "6", "--warmup", "1",
                        "--format", "json")
    doc = json.loads(result.stdout)
    rows = {r["metric"]: r for r in doc["latency"]["rows"]}
    assert result.exit_code == 1 and doc["latency"]["decision"] == "FAIL" and doc["answers"] is None
    assert rows["TTFT"]["decision"] == "regression" and rows["TTFT"]["base"]["n"] == rows["TTFT"]["current"]["n"] == 6


QUEUEING = "fixtures/bundles/realvllm-queueing.json.gz"  # a real vLLM queueing incident: TTFT p90 5 s, budget 500 ms


@pytest.mark.parametrize("ttft, fixed, code", [(0.0, "fixed", 0), (0.8, "still there", 1)])
def test_verify_report_says_whether_the_incident_symptom_is_gone(ttft, fixed, code):
    with AnswerServer(ttft=ttft) as after:
        result = verify(QUEUEING, "--candidate", after.url, "--requests", "8", "--warmup", "1")
    assert result.exit_code == code, result.output
    assert "symptom: pre-first-token (LD101): TTFT p90 5.00 s -> " in result.output
    assert f"budget 500 ms: {fixed}" in result.output
