"""The knee logic of ``doctor.runs.sweep_knee`` on its own: the ladder's order, the knee and the budget that
binds, a suspect client never the knee, and the recommendation the engine's evidence supports."""

from __future__ import annotations

from doctor.derive.load_summary import LoadSummary
from doctor.evidence import ClientHealth
from doctor.model import Budgets
from doctor.probes.selfcheck import merge
from doctor.runs.sweep_knee import (
    EngineFacts,
    Knee,
    Ladder,
    Level,
    causes,
    client_bottleneck,
    conclude,
    find_knee,
    recommend,
    sweep_dict,
)

BUDGETS = Budgets(ttft_s=0.5, tpot_s=0.05)


def level(value: float, ttft: float, tpot: float, engine: EngineFacts | None = None, client: str | None = None) -> Level:
    summary = LoadSummary(scenario="single", path="direct", n=64, ttft_p90_s=ttft, tpot_p90_s=tpot, e2e_p50_s=1.0)
    return Level(value, summary, engine or EngineFacts(missing="no /metrics"), client=client)


def run_ladder(ladder: Ladder, measure) -> list[Level]:
    """Drive the ladder against ``measure(value) -> Level`` until it says done."""
    levels: list[Level] = []
    while (value := ladder.next(levels, BUDGETS)) is not None:
        assert value not in {lv.value for lv in levels}, "a level measured twice"
        levels.append(measure(value))
    return levels


def tpot_grows(limit: float):
    """TPOT 10 ms per stream: within the 50 ms budget up to ``limit`` streams."""
    return lambda c: level(c, 0.1, 0.05 * c / limit)


def test_doubling_then_bisection_finds_the_knee_and_stops_past_it() -> None:
    levels = run_ladder(Ladder("concurrency", 1, 64), tpot_grows(5))
    assert [lv.value for lv in levels] == [1, 2, 4, 8, 6, 5]  # stops doubling at 8: never 16, 32, 64
    knee = find_knee(levels, BUDGETS)
    assert (knee.value, knee.binding, knee.first_over) == (5, "tpot", 6)


def test_the_ladder_ends_at_the_maximum_when_every_level_is_within() -> None:
    levels = run_ladder(Ladder("concurrency", 1, 12), tpot_grows(100))
    assert [lv.value for lv in levels] == [1, 2, 4, 8, 12]
    assert find_knee(levels, BUDGETS) == Knee(12, None, None)


def test_a_rate_sweep_bisects_to_its_tolerance() -> None:
    levels = run_ladder(Ladder("rate", 1, 64), lambda r: level(r, 0.1 if r <= 10 else 2.0, 0.02))
    knee = find_knee(levels, BUDGETS)
    assert knee.binding == "ttft" and knee.value is not None and knee.first_over is not None
    assert knee.value <= 10 < knee.first_over <= knee.value * 1.1


def test_the_budget_exceeded_by_more_binds() -> None:
    levels = [level(1, 0.1, 0.01), level(2, 0.6, 0.2)]  # TTFT 1.2x its budget, TPOT 4x
    assert find_knee(levels, BUDGETS).binding == "tpot"
    assert find_knee([level(1, 0.1, 0.01), level(2, 1.5, 0.06)], BUDGETS).binding == "ttft"


def test_a_level_whose_client_was_the_bottleneck_is_never_the_knee() -> None:
    levels = run_ladder(Ladder("concurrency", 1, 16),
                        lambda c: level(c, 0.1, 0.01, client="client CPU 100 % of a core" if c == 4 else None))
    knee = find_knee(levels, BUDGETS)
    assert [lv.value for lv in levels] == [1, 2, 4, 3]
    assert (knee.value, knee.binding) == (3, "client")


def test_no_knee_when_the_lightest_level_is_over() -> None:
    levels = run_ladder(Ladder("concurrency", 1, 16), lambda c: level(c, 2.0, 0.01))
    assert [lv.value for lv in levels] == [1]
    result = conclude(levels, BUDGETS, "concurrency", 16, {})
    assert result.knee.value is None and result.recommendation.setting == "replicas"
    assert sweep_dict(result)["knee"] == {"concurrency": None, "binding": "ttft", "first_over": 1}


QUEUED = EngineFacts(running_max=4, waiting_max=3, kv_usage_max=0.3, preemptions=0, max_num_seqs=4,
                     max_num_seqs_source="log: non-default args")


def test_a_queue_at_the_engine_limit_with_tpot_headroom_raises_max_num_seqs() -> None:
    engine = EngineFacts(running_max=2, waiting_max=0, max_num_seqs=4, max_num_seqs_source="log")
    levels = [level(1, 0.05, 0.010, engine), level(2, 0.05, 0.011, engine), level(4, 0.05, 0.012, engine),
              level(5, 0.9, 0.012, QUEUED)]
    knee = find_knee(levels, BUDGETS)
    assert (knee.value, knee.binding) == (4, "ttft")
    assert [name for name, _ in causes(levels, knee, BUDGETS)] == ["queue"]
    rec = recommend(levels, knee, BUDGETS, "concurrency", 16)
    assert (rec.setting, rec.current, rec.suggested, rec.inferred) == ("max_num_seqs", 4, 8, False)
    assert "queue at max_num_seqs 4" in rec.why[0] and "sweep again" in rec.why[0]


def test_kv_pressure_below_the_limit_asks_for_replicas() -> None:
    kv = EngineFacts(running_max=6, waiting_max=2, kv_usage_max=0.99, preemptions=12, max_num_seqs=256,
                     max_num_seqs_source="log")
    levels = [level(2, 0.1, 0.01, kv), level(4, 0.2, 0.02, kv), level(6, 1.5, 0.04, kv)]
    knee = find_knee(levels, BUDGETS)
    rec = recommend(levels, knee, BUDGETS, "concurrency", 64)
    assert (rec.setting, rec.suggested, rec.current) == ("replicas", 16, 256)  # 64 streams / 4 per replica
    assert any("preemption" in why for why in rec.why)


def test_ttft_growing_with_no_request_waiting_is_compute_below_the_limit() -> None:
    """As on a real vLLM on 2 CPU cores with 4 slots: TTFT p90 179, 335, 545, 762 ms at 1-4 streams,
    TPOT flat, nothing ever waiting. The knee (3) is below the limit, and the reason is compute."""
    def engine(running: int) -> EngineFacts:
        return EngineFacts(running_max=running, waiting_max=0, max_num_seqs=4, max_num_seqs_source="log")

    levels = [level(c, ttft, 0.05 * 0.9, engine(c)) for c, ttft in ((1, 0.179), (2, 0.335), (3, 0.45), (4, 0.762))]
    knee = find_knee(levels, BUDGETS)
    assert (knee.value, knee.binding, knee.first_over) == (3, "ttft", 4)
    assert [name for name, _ in causes(levels, knee, BUDGETS)] == ["prefill"]
    rec = recommend(levels, knee, BUDGETS, "concurrency", 8)
    assert (rec.setting, rec.suggested, rec.current) == ("replicas", 3, 4)  # 8 streams / 3 per replica
    assert "compute" in rec.why[0] and "no request waiting" in rec.why[1]


def test_without_engine_evidence_the_knee_is_the_setting_marked_inferred() -> None:
    levels = run_ladder(Ladder("concurrency", 1, 64), tpot_grows(5))
    result = conclude(levels, BUDGETS, "concurrency", 64, {})
    rec = result.recommendation
    assert (rec.setting, rec.suggested, rec.current, rec.inferred) == ("max_num_seqs", 5, None, True)
    doc = sweep_dict(result)
    assert doc["knee"]["concurrency"] == 5 and doc["knee"]["binding"] == "tpot"
    assert [lv["concurrency"] for lv in doc["levels"]] == [1, 2, 4, 5, 6, 8]
    assert doc["recommendation"]["setting"] == "max_num_seqs" and doc["recommendation"]["suggested"] == 5


def test_the_client_is_the_bottleneck_when_its_cpu_saturates_or_its_lag_rivals_the_budget() -> None:
    def health(cpu: float | None, lag: float | None) -> ClientHealth:
        return ClientHealth(cpu_percent_max=cpu, loop_lag_p99_ms=lag)

    assert client_bottleneck(health(95.0, 1.0), BUDGETS) == "client CPU 95 % of a core"
    assert client_bottleneck(health(30.0, 150.0), BUDGETS) is not None  # 150 ms lag against a 500 ms TTFT budget
    assert client_bottleneck(health(30.0, 30.0), BUDGETS) is None  # a busy host's lag, small against the budget
    assert client_bottleneck(health(None, None), BUDGETS) is None


def test_one_saturated_worker_of_a_sharded_client_makes_the_level_the_clients() -> None:
    """Sharded over processes, the client is judged per worker: one worker at a full core delays
    every stamp of its own streams, however idle the others were."""
    calm = ClientHealth(cpu_percent_max=40.0, loop_lag_p99_ms=2.0)
    busy = ClientHealth(cpu_percent_max=97.0, loop_lag_p99_ms=8.0, suspect=True, reasons=["client CPU reached 97 % of a core"])
    client = merge([calm, busy, calm], "httpx")
    why = client_bottleneck(client, BUDGETS)
    assert why is not None and why.startswith("client worker 1 of 3: CPU 97 %")
    assert client_bottleneck(merge([calm, calm], "httpx"), BUDGETS) is None
    sharded = level(256, 0.1, 0.01, client=why)  # well within both budgets, as the stamps say
    assert sharded.suspect and not sharded.within(BUDGETS)
    assert find_knee([level(128, 0.1, 0.01), sharded], BUDGETS).value == 128  # never the knee


def test_a_shard_that_froze_marks_the_merged_client_suspect_and_keeps_its_freezes_its_own() -> None:
    calm = ClientHealth(loop_lag_p99_ms=1.0, loop_lag_max_ms=4.0)
    frozen = ClientHealth(loop_lag_p99_ms=1.0, loop_lag_max_ms=300.0, suspect=True, freezes=[[2.0, 2.3]],
                          reasons=["event-loop lag max 300 ms > 50 ms: one stall of the client itself"])
    client = merge([calm, frozen], "httpx")
    assert client.suspect and client.loop_lag_max_ms == 300.0
    assert client.reasons == ["client worker 1: event-loop lag max 300 ms > 50 ms: one stall of the client itself"]
    assert client.freezes_of(1) == [[2.0, 2.3]] and client.freezes_of(0) == []
    assert client.freezes == [[2.0, 2.3]]  # every freeze, for a reader that does not know the shards
    lost = merge([calm, None], "httpx")  # a worker that never reported: suspect, said
    assert lost.suspect and "client worker 1: it ended without reporting" in lost.reasons[0]


def test_a_sweeps_reasons_wrap_under_their_own_text_and_analyze_names_a_sweep_report(tmp_path) -> None:
    """Issue 30 item 12: each reason's continuation lines began at column 0, and ``analyze sweep.json``
    said only "not an llm-doctor evidence bundle"."""
    import io
    import json

    from rich.console import Console
    from typer.testing import CliRunner

    from doctor.cli import app
    from reports.sweep_report import print_sweep

    result = conclude(run_ladder(Ladder("concurrency", 1, 64), tpot_grows(5)), BUDGETS, "concurrency", 64, {})
    out = io.StringIO()
    print_sweep(result, Console(file=out, width=60, color_system=None))
    text = out.getvalue().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith("  - "))
    reasons = text[start:]
    assert len(reasons) > len(result.recommendation.why)  # at 60 columns a reason wraps
    assert all(line.startswith(("  - ", "    ")) for line in reasons if line.strip()), reasons
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep_dict(result)))
    analysed = CliRunner().invoke(app, ["analyze", str(path)])
    assert analysed.exit_code == 2 and "a sweep report (llm-doctor sweep --json), not an evidence bundle" in analysed.output
