"""``llm-doctor verify`` end to end against real HTTP servers on 127.0.0.1 (``tests/support/answer_server``):
the same weights pass, perturbed ones fail, and every kind of bad input ends in a sentence, not a traceback."""

from __future__ import annotations

import json
import re

import pytest
from typer.testing import CliRunner

from doctor.checklib import gate_command
from doctor.cli import app
from tests.reports.test_report_xss import ALLOWED_TAGS
from tests.support.answer_server import AnswerServer
from tests.support.html_dom import inventory
from tests.support.nginx import free_port

runner = CliRunner()
FAST = ["--no-latency", "--deadline", "60"]
CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:"


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


@pytest.mark.slow
def test_the_latency_half_judges_the_candidate_as_compare_does(baseline):
    with AnswerServer(ttft=0.25) as slow:
        result = verify("--baseline", baseline.url, "--candidate", slow.url, "--no-answers", "--requests", "6", "--warmup", "1",
                        "--format", "json")
    doc = json.loads(result.stdout)
    rows = {r["metric"]: r for r in doc["latency"]["rows"]}
    assert result.exit_code == 1 and doc["latency"]["decision"] == "FAIL" and doc["answers"] is None
    assert rows["TTFT"]["decision"] == "regression" and rows["TTFT"]["base"]["n"] == rows["TTFT"]["current"]["n"] == 6


QUEUEING = "fixtures/bundles/realvllm-queueing.json.gz"  # a real vLLM queueing incident: TTFT p90 5 s, budget 500 ms


@pytest.mark.slow
@pytest.mark.parametrize("ttft, fixed, code", [(0.0, "fixed", 0), (0.8, "still there", 1)])
def test_verify_report_says_whether_the_incident_symptom_is_gone(ttft, fixed, code):
    with AnswerServer(ttft=ttft) as after:
        result = verify(QUEUEING, "--candidate", after.url, "--requests", "8", "--warmup", "1")
    assert result.exit_code == code, result.output
    assert "symptom: pre-first-token (LD101): TTFT p90 5.00 s -> " in result.output
    assert f"budget 500 ms: {fixed}" in result.output


@pytest.mark.slow
def test_the_gate_a_numerics_remediation_names_checks_the_symptom_and_the_answers_in_one_run():
    """``checklib.gate_command``, word for word with its placeholders filled: the incident's symptom
    on the candidate and the answers against the stable, both said, exit 0 when both hold."""
    with AnswerServer() as stable, AnswerServer(ttft=0.0) as changed:
        filled = {"REPORT": QUEUEING, "URL": changed.url, "STABLE_URL": stable.url}
        words = [filled.get(w, w) for w in gate_command().split()[2:]]
        result = verify(*words, "--requests", "8", "--warmup", "1", "--deadline", "60")
    assert result.exit_code == 0, result.output
    assert "answers: PASS" in result.output and "budget 500 ms: fixed" in result.output


# -- the HTML page, --long-context, a slow candidate ------------------------------------------------

def test_the_html_page_shows_the_answers_side_by_side_and_the_kl_per_prompt_against_its_floor(baseline, tmp_path):
    page = tmp_path / "v.html"
    with AnswerServer(shift=1.5) as broken:
        result = verify("--baseline", baseline.url, "--candidate", broken.url, *FAST, "--html", str(page))
    assert result.exit_code == 1 and f"wrote {page}" in result.output
    html = page.read_text()
    inv = inventory(html)
    assert {tag for tag, _ in inv.tags} <= ALLOWED_TAGS | {"ul"} and inv.scripts == []
    assert [a["content"] for t, a in inv.tags if t == "meta" and a.get("http-equiv")] == [CSP]
    chart = html.split('<section id="kl">', 1)[1].split("</section>", 1)[0]
    labels = [t for t in inventory(chart).text if t.strip()]
    for pid in ("chat-capital", "json-object", "code-sql", "completion-story"):  # tool calls have no text to score
        assert pid in labels
    assert chart.count('class="bad"') >= 16  # every prompt's KL is over the bar on the mean
    differ = html.split('<section id="differ">', 1)[1].split("</section>", 1)[0]
    assert "self-repeating answer" in differ and differ.count("<pre>") >= 2 * 16
    text = " ".join(inventory(differ).text)
    assert "first differs at word 1" in text and "baseline" in text and "candidate" in text


def test_long_context_finds_what_a_lossy_kv_cache_forgets(baseline, tmp_path):
    with AnswerServer() as same, AnswerServer(recall=1000) as lossy:
        ok = verify("--baseline", baseline.url, "--candidate", same.url, "--no-answers", "--no-latency", "--long-context")
        bad = verify("--baseline", baseline.url, "--candidate", lossy.url, "--no-answers", "--no-latency", "--long-context",
                     "--json", str(tmp_path / "v.json"), "--html", str(tmp_path / "v.html"), "--md", str(tmp_path / "v.md"))
    assert ok.exit_code == 0 and ok.stdout.startswith("long-context: PASS"), ok.output
    assert "of a max_model_len of 4,096" in ok.output  # the length /v1/models gave
    assert bad.exit_code == 1 and "long-context: FAIL" in bad.output
    doc = json.loads((tmp_path / "v.json").read_text())["long_context"]
    found = {n["needle_id"]: n["candidate_found"] for n in doc["needles"]}
    assert found == {"needle-10": 0, "needle-50": 0, "needle-90": 2}  # only the needle near the question survives
    assert doc["decision"] == "FAIL" and doc["max_model_len"] == 4096
    assert 0.8 * 4096 < doc["context_tokens"] < 0.9 * 4096  # sized by the server's own count (a word count gives ~70 %)
    assert "needle-10" in (tmp_path / "v.html").read_text() and "**long-context: FAIL**" in (tmp_path / "v.md").read_text()


def test_recorded_needle_answers_stand_in_for_the_baseline(baseline, tmp_path):
    record = tmp_path / "stable.jsonl"
    saved = verify("--candidate", baseline.url, "--save-answers", str(record), "--no-answers", "--no-latency", "--long-context")
    assert "recorded 9 answers" in saved.output  # 3 needles x 3 repeats
    with AnswerServer(recall=1000) as lossy:
        bad = verify("--baseline-answers", str(record), "--candidate", lossy.url, "--no-answers", "--no-latency", "--long-context")
        unrecorded = verify("--baseline-answers", str(record), "--candidate", lossy.url, "--no-latency", "--long-context")
    assert bad.exit_code == 1 and "needle-10 (depth 10%): the baseline found" in bad.output
    # a recording of the needles alone has no answer to the prompts: that half cannot tell, the needles still fail
    assert unrecorded.exit_code == 1 and "answers: ABSTAIN" in unrecorded.output and "0 prompts answered by both" in unrecorded.output


def test_long_context_takes_the_length_from_a_flag_and_fails_a_candidate_that_refuses_it(baseline):
    with AnswerServer(lists_len=False) as unlisted, AnswerServer(max_model_len=2048) as shorter:
        unknown = verify("--baseline", unlisted.url, "--candidate", unlisted.url, "--no-answers", "--no-latency", "--long-context")
        given = verify("--baseline", unlisted.url, "--candidate", unlisted.url, "--no-answers", "--no-latency", "--long-context",
                       "--max-model-len", "2048")
        refused = verify("--baseline", baseline.url, "--candidate", shorter.url, "--no-answers", "--no-latency", "--long-context")
    assert unknown.exit_code == 2 and "give --max-model-len N" in unknown.output
    assert given.exit_code == 0 and "of a max_model_len of 2,048" in given.output
    said = " ".join(refused.output.split())
    assert refused.exit_code == 1 and "needle-10 (depth 10%), needle-50 (depth 50%), needle-90 (depth 90%): no answer: HTTP 400" in said
    assert said.count("maximum context length is 2048") == 1


def test_a_candidate_slower_than_the_deadline_ends_with_what_was_measured(baseline):
    with AnswerServer(ttft=3.0) as slow:
        result = verify("--baseline", baseline.url, "--candidate", slow.url, "--deadline", "4", "--format", "json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 2 and doc["answers"]["decision"] == "ABSTAIN"
    assert any("--deadline ran out" in n and "censored, not failed" in n for n in doc["notes"])
    assert not any(p["problems"] for p in doc["answers"]["prompts"])  # cut by the deadline is no failure of the candidate
    assert any(p["candidate"] for p in doc["answers"]["prompts"])  # what came is kept
    assert doc["latency"]["decision"] == "ABSTAIN" and "ran out before it" in doc["latency"]["reasons"][0]


def test_a_candidate_whose_requests_fail_fails_the_latency_half_and_its_url_keeps_no_password(baseline):
    """A failed request is latency users felt: the answered ones' samples alone would pass a candidate
    failing every stream (the review of this round). Credentials in a URL never reach the output."""
    with AnswerServer(mode="fail") as failing:
        url = failing.url.replace("http://", "http://alice:s3cretpw@")
        result = verify("--baseline", baseline.url, "--candidate", url, "--no-answers", "--requests", "4", "--warmup", "0",
                        "--format", "json")
    doc = json.loads(result.stdout)
    assert result.exit_code == 1 and doc["latency"]["decision"] == "FAIL"
    assert re.match(r"the candidate failed (\d+) of \1 requests \(the baseline 0 of \d+\): http-status", doc["latency"]["reasons"][0])
    assert "s3cretpw" not in result.output


@pytest.mark.parametrize("mode", ["fail"])
def test_verify_report_is_not_fixed_when_the_requests_fail(mode):
    with AnswerServer(mode=mode) as after:
        result = verify(QUEUEING, "--candidate", after.url, "--requests", "4", "--warmup", "0")
    assert result.exit_code != 0 and ": fixed" not in result.output, result.output
