"""``llm-doctor size`` and ``diagnose``/``collect --model-dir`` end to end, through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from doctor.bundle import load_path
from doctor.cli import app

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "fixtures" / "model-configs" / "tiny-llama-realvllm"
runner = CliRunner()


def real_log(tmp_path: Path, scenario: str = "healthy") -> Path:
    """The real-vLLM stage's 0.32.0 log lines (the ones its bundle kept), as a log file again."""
    evidence = load_path(ROOT / "fixtures" / "bundles" / f"realvllm-{scenario}.json.gz").log
    path = tmp_path / "vllm.log"
    path.write_text("".join(line.text + "\n" for line in evidence.matched))
    return path


def test_the_issue_example_gives_the_named_json_fields() -> None:
    result = runner.invoke(app, ["size", str(TINY), "--kv-cache-memory", "1GiB", "--max-model-len", "8192", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {k: doc[k] for k in ("params", "weights_bytes", "kv_bytes_per_token", "kv_cache_tokens", "max_concurrency")} == {
        "params": 71_914_496, "weights_bytes": 143_828_992, "kv_bytes_per_token": 8192, "kv_cache_tokens": 131_072, "max_concurrency": 16.0}


def test_without_a_budget_there_is_no_capacity() -> None:
    doc = json.loads(runner.invoke(app, ["size", str(TINY / "config.json"), "--json"]).stdout)
    assert "kv_cache_tokens" not in doc and "max_concurrency" not in doc and doc["kv_bytes_per_token"] == 8192


def test_size_against_the_real_log_agrees_and_a_wrong_config_exits_1(tmp_path: Path) -> None:
    log = real_log(tmp_path)
    agree = runner.invoke(app, ["size", str(TINY), "--log", str(log)])
    assert agree.exit_code == 0 and "131,072 tokens reported, 131,072 computed" in agree.stdout and "agrees" in agree.stdout
    wrong = tmp_path / "config.json"
    wrong.write_text(json.dumps({**json.loads((TINY / "config.json").read_text()), "num_key_value_heads": 8}))
    result = runner.invoke(app, ["size", str(wrong), "--log", str(log)])
    assert result.exit_code == 1 and "DISAGREES" in result.stdout and "kv_cache_dtype fp8" in result.stdout


def test_a_bad_flag_or_config_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for args in (["--tp", "0"], ["--gpu", "B300"], ["--kv-cache-memory", "lots"], ["--kv-cache-dtype", "int3"], ["--device", "tpu"]):
        result = runner.invoke(app, ["size", str(TINY), *args])
        assert result.exit_code == 2 and "Traceback" not in result.output and "error:" in result.output, args
    (tmp_path / "config.json").write_text("{broken")
    result = runner.invoke(app, ["size", str(tmp_path)])
    assert result.exit_code == 2 and "not JSON" in result.output


def test_collect_with_model_dir_keeps_the_config_and_analyze_runs_ld406(tmp_path: Path) -> None:
    bundle = tmp_path / "b.json.gz"
    result = runner.invoke(app, ["collect", "--log", str(real_log(tmp_path)), "--model-dir", str(TINY), "--no-gpu", "--no-host",
                                 "-o", str(bundle)])
    assert result.exit_code == 0, result.output
    assert load_path(bundle).model_config is not None
    out = tmp_path / "r.json"
    runner.invoke(app, ["analyze", str(bundle), "--json", str(out)])
    report = json.loads(out.read_text())
    ld406 = next(r for r in report["results"] if r["code"] == "LD406")
    assert ld406["outcome"] == "pass" and report["views"]["sizing"]["kv_cache_tokens"] == 131_072


def test_a_missing_model_dir_is_refused_before_collecting_like_a_missing_log(tmp_path: Path) -> None:
    """A typo'd input path is the user's to fix, not evidence: one line, exit 2, nothing written."""
    bundle = tmp_path / "b.json.gz"
    result = runner.invoke(app, ["collect", "--log", str(real_log(tmp_path)), "--model-dir", str(tmp_path / "nope"), "--no-gpu",
                                 "--no-host", "-o", str(bundle)])
    assert result.exit_code == 2 and "--model-dir: no model config" in result.output, result.output
    assert not bundle.exists()


def test_a_max_model_len_beyond_the_config_positions_is_warned() -> None:
    """The tiny model was trained for 2048 positions: 8192 sizes a cache vLLM would refuse to start with."""
    longest = json.loads((TINY / "config.json").read_text())["max_position_embeddings"]
    result = runner.invoke(app, ["size", str(TINY), "--kv-cache-memory", "1GiB", "--max-model-len", str(longest * 4), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["params"] > 0
    assert f"beyond the {longest} positions" in result.stderr
    within = runner.invoke(app, ["size", str(TINY), "--kv-cache-memory", "1GiB", "--max-model-len", str(longest), "--json"])
    assert "positions" not in within.stderr


def test_a_max_model_len_the_kv_cache_cannot_hold_once_says_vllm_would_not_start() -> None:
    """Issue 30 item 12: "0.43x" where vLLM refuses to start; the longest request it holds is the fix."""
    config = Path(__file__).resolve().parents[2] / "fixtures" / "model-configs" / "llama-3-8b"
    result = runner.invoke(app, ["size", str(config), "--max-model-len", "100000", "--gpu", "L4"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "0.43x for 100,000 tokens per request: vLLM refuses to start" in result.output
    assert "the longest it holds is 43,296 tokens" in result.output
    fits = runner.invoke(app, ["size", str(config), "--max-model-len", "8192", "--gpu", "L4"], env={"COLUMNS": "200"})
    assert "refuses" not in fits.output
