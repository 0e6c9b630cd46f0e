"""The verdict between the per-request join's two checks: the slow requests held before the engine
(LD315, the gateway's) or queued in it (LD110, the engine's).

Built from bundles whose spans are shaped as vLLM 0.32's (``tests.support.bundles.traced``), through
HAProxy exporting its own span: two of twenty gateway requests are slow, and their own spans say
where their time went. Each case fires one of the two checks and the verdict takes its class and
remediation; the other passes, since each needs over half of the same requests' TTFT.
"""

from __future__ import annotations

import pytest

from doctor.checking.runner import analyze
from doctor.model import Outcome, Symptom
from tests.support.bundles import bundle, traced
from tests.support.make_check_fixtures_gateway_limits import joined

SLOW = {18: 1.15, 19: 1.06}


@pytest.mark.parametrize(("held", "queued", "code", "symptom", "setting", "quiet"), [
    (SLOW, {}, "LD315", Symptom.PROXY_ONLY, "maxconn", "LD110"),
    ({}, SLOW, "LD110", Symptom.PRE_FIRST_TOKEN, "max_num_seqs", "LD315"),
])
def test_the_verdict_takes_the_hop_the_slow_requests_spent(held, queued, code, symptom, setting, quiet):
    ev = joined([0.2] * 18 + [1.4, 1.31])
    report = analyze(bundle(stream=ev, traces=traced(ev, queued, held=held, gateway="haproxy")))
    assert report.verdict.symptom is symptom
    assert report.verdict.primary_code == code
    assert report.verdict.primary_remediation is not None and report.verdict.primary_remediation.setting == setting
    other = next(r for r in report.results if r.code == quiet)
    assert other.outcome is Outcome.PASS, other.message
