"""``verify REPORT``'s judgement of the incident's symptom (``judge_symptom``), on the per-request
samples of a real incident: the real-vLLM queueing incident's probe measured TTFT 2.9-3.3 s under a
4 s budget, and its symptom was named from the engine's queue (89 % of TTFT queued)."""

from __future__ import annotations

import pytest

from doctor.runs.verify_outcome import judge_symptom

#: The queueing incident's five direct requests (tests/realvllm/test_incidents.py, 2026-12-06).
WITHIN_BUDGET = [2.997, 3.265, 3.035, 3.297, 2.922]
#: The same server re-probed unchanged beside the same users, 15 % faster by chance (that run's p50
#: 3.53 s -> 2.99 s: beyond compare's noise test at n 5 / 12), and with its queue gone.
UNCHANGED = [2.71, 2.95, 3.02, 2.88, 3.10, 2.99, 2.93, 3.05, 2.97, 3.20, 2.90, 3.01]
QUEUE_GONE = [0.31, 0.28, 0.35, 0.30, 0.29, 0.33, 0.27, 0.32]
FIRED = "LD101 fired again: queue time 2.7 s is 88 % of TTFT 3.1 s"


def judged(before: list[float], after: list[float], recurred: str | None, **kw: int):
    return judge_symptom("pre-first-token (LD101)", "TTFT", before, after, 4.0, recurred, **kw)


def test_the_finding_that_named_the_symptom_decides_within_the_budget():
    still = judged(WITHIN_BUDGET, UNCHANGED, FIRED)
    assert still.fixed is False and "still there (LD101 fired again" in still.sentence
    gone = judged(WITHIN_BUDGET, QUEUE_GONE, "")
    assert gone.fixed is True and "did not fire again" in gone.sentence


def test_a_p90_over_the_budget_is_still_there_whatever_the_findings():
    over = [x + 2.0 for x in WITHIN_BUDGET]
    assert judged(over, over, "").fixed is False and judged(over, QUEUE_GONE, "").fixed is True


@pytest.mark.parametrize("after, failed, recurred, fixed", [
    ([], 0, "", None),  # nothing measured
    ([], 5, "", False),  # every request failed: no one was helped
    (QUEUE_GONE, 3, "", False),  # 3 of 11 failed
    (QUEUE_GONE, 0, None, None),  # an inconclusive incident: nothing to hold the re-diagnosis to
])
def test_what_cannot_tell_and_what_helped_no_one(after, failed, recurred, fixed):
    assert judged(WITHIN_BUDGET, after, recurred, failed=failed, measured=len(after) + failed).fixed is fixed
