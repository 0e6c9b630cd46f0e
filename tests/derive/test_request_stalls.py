"""Each probe request's longest stall between two tokens, and the other requests' prefills it sat behind.

The real case: the bundle of the real vLLM CPU build under the prefill-interference incident
(``fixtures/bundles/realvllm-traced-prefill-interference.json.gz``, provenance in
fixtures/PROVENANCE.md): one user's ~1,800-token prompt every few seconds while three users and
the probe stream. Every probe stream's longest stall sat behind one of those prompts, and the join
must say so from the spans alone. The built cases hold the rules the real one cannot vary: the
union of overlapping prefills, a prefill outside the stall, the request's own span, the probe's
own requests told from other users'.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from doctor.bundle import load_path
from doctor.checking.runner import analyze
from doctor.derive.request_hops import derive_request_hops
from doctor.derive.request_stalls import STALL_COVERED, longest_stall
from doctor.evidence import RequestTrace, Span
from doctor.evidence.stream import TokenEvent
from tests.support.bundles import bundle, request, stream, traced

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "fixtures" / "bundles" / "realvllm-traced-prefill-interference.json.gz"


def test_real_vllm_every_streams_longest_stall_sat_behind_another_users_long_prompt() -> None:
    view = derive_request_hops(load_path(REAL))
    timed = [row for row in view.requests if row.stall is not None]
    assert len(timed) >= 3
    for row in timed:
        stall = row.stall
        assert stall is not None and stall.behind, row
        longest = stall.behind[0]
        # another user's prompt, several times the probe's own, computed through the whole stall
        assert not longest.probe and longest.prompt_tokens and row.prompt_tokens
        assert longest.prompt_tokens > 5 * row.prompt_tokens, (longest, row.prompt_tokens)
        assert stall.covered >= 0.9 and longest.overlap >= 0.9 * stall.seconds, stall
        assert stall.seconds > 10 * stall.usual, stall
    assert view.stalled and view.stalled_behind == len(view.stalled)
    longest_first = [view.requests[i].stall.seconds for i in view.stalled]  # type: ignore[union-attr]
    assert longest_first == sorted(longest_first, reverse=True)


def test_real_vllm_ld213_names_the_prompts_and_ld202_still_fires() -> None:
    report = analyze(load_path(REAL))
    fired = {f.code: f for f in report.findings}
    assert {"LD202", "LD213"} <= set(fired)
    ld213 = fired["LD213"]
    assert "another user's request" in ld213.summary and "1,837 prompt tokens" in ld213.summary
    assert ld213.remediation.setting == report.verdict.primary_remediation.setting == "max_num_batched_tokens"


def _span(trace: str, start: float, prefill: float, tokens: int = 1000, rid: str = "x") -> Span:
    """A vLLM request span whose prompt was computed from ``start`` for ``prefill`` seconds (clocks agree)."""
    return Span(trace_id=trace, span_id="1" * 16, name="llm_request", start_ns=round(start * 1e9),
                end_ns=round((start + prefill + 1) * 1e9),
                attributes={"gen_ai.latency.time_to_first_token": prefill, "gen_ai.latency.time_in_model_prefill": prefill,
                            "gen_ai.request.id": rid, "gen_ai.usage.prompt_tokens": tokens})


def _streamed(times: list[float]) -> RequestTrace:
    req = RequestTrace(index=0, path="direct", t_sent=0.0)
    req.tokens = [TokenEvent(t=t) for t in times]
    return req


def test_overlapping_prefills_count_once_and_one_outside_the_stall_not_at_all() -> None:
    req = _streamed([0.1, 0.2, 1.2, 1.3])  # the stall: 0.2 -> 1.2
    own = _span("a" * 32, 0.0, 0.1)
    b, c, d = _span("b" * 32, 0.3, 0.4, rid="b"), _span("c" * 32, 0.5, 0.4, rid="c"), _span("d" * 32, 1.5, 2.0, rid="d")
    windows = [(own, (0.0, 0.1)), (b, (0.3, 0.7)), (c, (0.5, 0.9)), (d, (1.5, 3.5))]
    stall = longest_stall(req, 0.0, windows, own, {"a" * 32})
    assert stall is not None and stall.after_token == 2
    assert stall.seconds == pytest.approx(1.0) and stall.usual == pytest.approx(0.1)
    assert stall.covered == pytest.approx(0.6)  # 0.3 -> 0.9: the two overlap 0.5 -> 0.7, counted once
    assert sorted(b.request_id for b in stall.behind) == ["b", "c"]  # d ran after the stall; the request's own span never counts


def test_the_probes_own_request_is_told_from_another_users() -> None:
    req = _streamed([0.1, 0.2, 1.2])
    own, sibling = _span("a" * 32, 0.0, 0.1), _span("e" * 32, 0.2, 1.0, tokens=50, rid="sibling")
    stall = longest_stall(req, 0.0, [(sibling, (0.2, 1.2))], own, {"a" * 32, "e" * 32})
    assert stall is not None and stall.behind[0].probe and stall.covered == pytest.approx(1.0)


def test_one_token_has_no_stall() -> None:
    assert longest_stall(_streamed([0.4]), 0.0, [], _span("a" * 32, 0.0, 0.4), set()) is None


def test_built_streams_the_slowest_stalls_behind_prompts_are_counted_against_the_rest() -> None:
    probe = stream([request("direct", i, ttft=0.2, gaps=[0.03] * 5 + [1.5 + 0.1 * i if i >= 8 else 0.03] + [0.03] * 5, start=i * 4.0)
                    for i in range(10)])
    traces = traced(probe, {}, prompts=[(i * 4.0 + 0.35, 1.5 + 0.1 * i, 1800) for i in (8, 9)])
    view = derive_request_hops(bundle(stream=probe, traces=traces))
    assert [view.requests[i].index for i in view.stalled] == [9]  # the p90 of ten stalls: the longest alone
    assert view.stalled_behind == len(view.stalled)
    assert view.typical_behind_share == 0.0  # the 30 ms gaps ran with no prompt computed
    assert all(view.requests[i].stall.covered >= STALL_COVERED for i in view.stalled)  # type: ignore[union-attr]
