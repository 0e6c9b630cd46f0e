"""The check toolkit's public names are a contract with third-party checks: pinned here.

Adding a name is a reviewed change to this list; removing or renaming one breaks plugins.
"""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import typer

import doctor.checklib as checklib
from doctor.checking.contract import NotApplicable
from doctor.cli import app
from doctor.derive.stream_stats import StreamStats
from doctor.evidence import RunRecord
from doctor.model import RERUN_INSTRUCTION, RERUN_INSTRUCTIONS, VERIFY_REPORT

ROOT = Path(__file__).resolve().parents[2]

EXPORTS = {
    "COMPRESSED", "KNOWN_PROXIES", "KV_FILL_TARGET", "MAX_GPU_MEMORY_UTILIZATION", "MIN_FLAT_SAMPLES",
    "STABLE_DEFAULTS", "V1_SERVE_MAX_NUM_SEQS", "PathPair", "Setting", "add_capacity", "capped_utilization", "queue_remediation", "StreamCap", "stream_cap",
    "default_max_num_seqs", "detect_proxy", "ENGINE_FLAGS", "IDLE_TIMEOUTS", "buffering_remediation",
    "compression_remediation", "idle_timeout_for", "idle_timeout_remediation", "engine_flag", "engine_of", "engine_path", "engine_setting", "foreign_prompt_tokens",
    "prompt_tokens_around", "process_cores", "gateway_headers", "gateway_identity", "host_saturated", "host_values",
    "header", "inferred_max_num_seqs", "is_off", "max_num_seqs_in_use", "max_num_seqs_stated", "measured_pair", "engine_metric", "metric_read", "model_len", "not_in_metrics", "rerun", "rerun_gated", "gate_command", "response_start_remediation",
    "sequences_that_fit", "stream_encoding", "tokens_per_request", "ttft_wait", "unidentified_setting", "vllm_flag", "who_answered",
    # gateway limits, retries and connect timeouts (LD309, LD310, LD501)
    "QUEUEING_CAPS", "cap_remediation", "retry_remediation", "CONNECT_TIMEOUTS", "hung_gateway_remediation", "engine_intake", "gateway_refusal", "gateway_wait", "probe_sent",
    # autoscalers (LD601-LD611)
    "DEFAULT_STARTUP_S", "ScalerFault", "engine_family", "judge_signals", "queue_signal", "rescan", "retired_metric", "scaler_fire",
    "scalers_of", "serves_router", "signals_of", "startup_s", "history_scaler", "tried",
    # structured output (LD108, LD212)
    "ConstrainedRun", "constrained_run", "generated_within", "per_token", "request_ttft",
    # the step budget other requests' prefills stall streams by (LD202, LD213)
    "StepBudget", "step_budget", "step_budget_evidence", "step_budget_idle", "step_budget_in_use", "step_budget_remediation",
}


def test_exports_are_pinned() -> None:
    assert set(checklib.__all__) == EXPORTS
    assert len(checklib.__all__) == len(EXPORTS), "a name is listed twice in __all__"
    for name in EXPORTS:
        assert getattr(checklib, name) is not None, name
        assert name in checklib.__doc__ or name.isupper() or getattr(checklib, name).__doc__, f"{name} is undocumented"


def test_checks_have_no_private_helper_modules() -> None:
    """The helpers live in the toolkit, where plugins can import them too."""
    private = [p.name for p in (ROOT / "checks").glob("_*.py") if p.name != "__init__.py"]
    assert private == []


def test_every_check_takes_its_helpers_from_the_toolkit() -> None:
    for path in sorted((ROOT / "checks").glob("*.py")):
        text = path.read_text()
        assert "from checks." not in text and "import checks." not in text, f"{path.name} imports another check module"


def test_every_verify_text_opens_with_the_rerun_and_names_one_verify_command() -> None:
    """One wording, composed in one place: the renderers recognise its opening (a demo says it
    differently); a numerics change names only the gate, which is the latency half too; a scaling
    change, which may have no probe behind it, reads the object again and re-runs a whole diagnose."""
    texts = {"rerun": checklib.rerun("X"), "gated": checklib.rerun_gated("X"),
             "gated long": checklib.rerun_gated("X", long_context=True)}
    for name, text in texts.items():
        assert any(text.startswith(o) for o in RERUN_INSTRUCTIONS) and text.endswith("; expect X"), name
        assert text.count("`llm-doctor verify") == 1, name
    assert texts["rerun"].startswith(RERUN_INSTRUCTION) and f"`{VERIFY_REPORT}`" in texts["rerun"]
    assert "--baseline" not in texts["rerun"]
    assert f"`{checklib.gate_command()}`" in texts["gated"] and "--long-context" not in texts["gated"]
    assert f"`{checklib.gate_command(long_context=True)}`" in texts["gated long"]
    rescan = checklib.rescan("X")
    assert rescan.index("llm-doctor scaling -") < rescan.index("`llm-doctor diagnose`") < rescan.index("expect X")
    assert "llm-doctor verify" not in rescan


def test_the_verify_commands_remediations_name_are_verifys_own() -> None:
    """A command a remediation tells the reader to run parses as ``llm-doctor verify`` would: its
    options exist, and a REPORT and a --candidate are what it takes."""
    verify = typer.main.get_command(app).commands["verify"]
    for command in (VERIFY_REPORT, checklib.gate_command(), checklib.gate_command(long_context=True)):
        words = command.split()
        assert words[:2] == ["llm-doctor", "verify"], command
        with click.Context(verify) as ctx:
            parsed = verify.parse_args(ctx, words[2:])
        assert parsed == [] and ctx.params["report"].name == "REPORT" and ctx.params["candidate"] == "URL", command
        assert ctx.params["long_context"] == ("--long-context" in words)


def test_every_snapshotted_remediation_says_the_shared_verify_text() -> None:
    """Every built-in check's remediation, as its snapshots hold it, opens with the shared rerun
    (a scaling one with the object read again); those that change the model's numerics (fp8,
    speculative decoding) name the answers gate instead of the latency half alone."""
    numerics = {"quantization", "kv_cache_dtype", "num_speculative_tokens"}
    snaps = [json.loads(p.read_text()) for p in sorted((ROOT / "fixtures" / "checks").glob("*/*.snap"))]
    remediations = [s["remediation"] for s in snaps if s.get("remediation")]
    assert len(remediations) > 50
    rescan = checklib.rescan("X").removesuffix("X")
    for rem in remediations:
        assert rem["verify"].startswith((*RERUN_INSTRUCTIONS, rescan)), rem["verify"]
        assert (rem["setting"] in numerics) == ("--baseline STABLE_URL" in rem["verify"]), rem


def test_vllm_flag_spells_the_command_line() -> None:
    assert checklib.vllm_flag("max_num_seqs") == "vllm serve flag --max-num-seqs"
    assert (checklib.vllm_flag("pipeline_parallel_size", "tensor_parallel_size")
            == "vllm serve flags --pipeline-parallel-size / --tensor-parallel-size")


def test_sequences_that_fit_leaves_the_target_share_free() -> None:
    assert checklib.sequences_that_fit(10_000, 1_000) == 9  # 0.9 of the cache by default
    assert checklib.sequences_that_fit(10_000, 1_000, target=1.0) == 10
    assert checklib.sequences_that_fit(999, 1_000, target=1.0) == 0


def test_utilization_is_capped() -> None:
    assert checklib.capped_utilization(0.97) == checklib.MAX_GPU_MEMORY_UTILIZATION
    assert checklib.capped_utilization(0.85) == 0.85


def test_measured_pair_raises_not_applicable_without_both_paths() -> None:
    with pytest.raises(NotApplicable, match="needs both the direct"):
        checklib.measured_pair(StreamStats())


def test_prompt_tokens_around_a_freeze_are_the_counter_beyond_the_probes_own() -> None:
    """The one "did a prompt arrive" helper LD202 and LD210 share: the prompt-token counter between
    the scrapes around a freeze, less the probe's own prompts whose first token came in that bracket."""
    from doctor.engine_metrics.runtime import readings
    from doctor.evidence import Scrape
    from tests.support.bundles import exposition, request, stream

    def scrape(t: float, prompts: int) -> Scrape:
        return Scrape(phase="during", t=t, wall=1_700_000_000.0 + t, status=200,
                      text=exposition({"vllm:prompt_tokens_total": prompts}))

    series = readings([scrape(0.0, 100), scrape(1.0, 100), scrape(2.0, 400), scrape(3.0, 400)])
    own = request("direct", 0, ttft=1.5, gaps=[0.1], start=0.0)
    own.prompt_tokens = 100
    probe = stream([own])
    assert checklib.prompt_tokens_around(series, probe, 0.2, 0.8) == 0  # the counter stood still
    assert checklib.prompt_tokens_around(series, probe, 1.2, 1.8) == 200  # 300 prefilled, 100 the probe's
    assert checklib.prompt_tokens_around(series, probe, 2.5, 3.5) is None  # no scrape after it: unknown


def _budget(largest_step: float | None, batched: int | None = None, chunked: bool | None = None) -> checklib.StepBudget:
    """``step_budget`` with these settings in use, as a run record's engine config gives them."""
    config = {k: v for k, v in (("max_num_batched_tokens", batched), ("chunked_prefill", chunked)) if v is not None}
    return checklib.step_budget(None, RunRecord(engine_config=config), largest_step)


@pytest.mark.parametrize("largest_step, batched, chunked, target, cuts", [
    (1800, 8192, None, 2048, False),  # one 1,800-token prompt: a 2048 budget still holds it whole
    (4096, 8192, None, 2048, True),  # several prompts together: 2048 splits their step
    (None, 8192, None, 2048, True),  # no step measured: the cut is named, as before
    (300, 256, None, 512, False),  # already under the floor: never "lowered" to 512
    (300, None, False, None, True),  # chunked prefill off: turning it on changes every step
    (512, None, None, 512, False),  # budget unknown, steps of 512 at most: no budget the lever sets cuts them
    (1024, None, None, 512, True),  # budget unknown: at least 1024, halved to 512
    (None, None, None, 2048, True),  # nothing known: 2048, as before
])
def test_the_step_budget_is_named_only_where_it_cuts_a_step(largest_step, batched, chunked, target, cuts) -> None:
    budget = _budget(largest_step, batched, chunked)
    assert (budget.target, budget.cuts) == (target, cuts)
