"""The runner: narrowing, missing evidence, isolation of a broken check, option overrides."""

from __future__ import annotations

import pytest

from doctor.checking.registry import load_registry
from doctor.checking.runner import AnalyzeOptions, analyze, resolve_options
from doctor.foundation.errors import UsageError
from doctor.model import Budgets, Outcome
from tests.support import bundles


@pytest.fixture
def sample_registry():
    return load_registry("tests.support.sample_checks", plugins=False)


def one_request_bundle():
    return bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.1, gaps=[0.02] * 5)]))


def outcomes(report):
    return {r.code: r for r in report.results}


def test_broken_check_is_an_error_result_and_others_still_run(sample_registry):
    report = analyze(one_request_bundle(), registry=sample_registry)
    results = outcomes(report)
    assert results["TS002"].outcome is Outcome.ERROR
    assert "ZeroDivisionError" in results["TS002"].message
    assert results["TS001"].outcome is Outcome.FINDING
    assert [f.code for f in report.findings] == ["TS001"]


def test_absent_evidence_is_missing_evidence_with_a_reason(sample_registry):
    results = outcomes(analyze(one_request_bundle(), registry=sample_registry))
    assert results["TS003"].outcome is Outcome.MISSING_EVIDENCE
    assert "gpu" in results["TS003"].message


def test_failed_probe_reason_reaches_missing_evidence(sample_registry):
    from doctor.evidence import EvidenceError

    bundle = one_request_bundle()
    bundle.errors.append(EvidenceError("gpu", "nvml", "nvmlInit", "unavailable", "NVML library not found", fatal=True))
    assert "NVML library not found" in outcomes(analyze(bundle, registry=sample_registry))["TS003"].message


def test_set_overrides_a_threshold_with_its_type(sample_registry):
    report = analyze(one_request_bundle(), AnalyzeOptions(settings={"TS001": {"min_ok": "2"}}), registry=sample_registry)
    assert outcomes(report)["TS001"].outcome is Outcome.PASS


def test_set_by_name_works_too(sample_registry):
    options = AnalyzeOptions(settings={"sample-fires-on-success": {"min_ok": "5"}})
    assert outcomes(analyze(one_request_bundle(), options, registry=sample_registry))["TS001"].outcome is Outcome.PASS


@pytest.mark.parametrize(
    "settings",
    [{"TS001": {"nope": "1"}}, {"TS999": {"min_ok": "1"}}, {"TS001": {"min_ok": "many"}}],
)
def test_bad_set_is_a_usage_error(sample_registry, settings):
    with pytest.raises(UsageError):
        analyze(one_request_bundle(), AnalyzeOptions(settings=settings), registry=sample_registry)


def test_select_and_ignore_by_prefix_and_name(sample_registry):
    chosen = sample_registry.select(["TS"], ["sample-always-raises"])
    assert [s.code for s in chosen] == ["TS001", "TS003"]
    assert [s.code for s in sample_registry.select(["TS003"], [])] == ["TS003"]


def test_aliases_find_select_and_set():
    """The words the issue uses ("queueing", "cold start") reach the checks they mean."""
    registry = load_registry(plugins=False)
    assert registry.find("queueing").code == "LD101"
    assert registry.find("Cold Start").code == "LD103"
    assert [s.code for s in registry.select(["queueing", "transport"], [])] == ["LD101", "LD104"]
    assert "LD102" not in [s.code for s in registry.select(["LD1"], ["prefill-bound"])]
    spec = registry.find("LD101")
    assert resolve_options(spec, {"queueing": {"queue_share": "0.7"}})["queue_share"] == 0.7


def test_a_former_code_still_selects_and_sets_its_check():
    """LD208 became LD508 (its class is general): runbooks that say LD208 keep working, exactly."""
    registry = load_registry(plugins=False)
    assert [s.code for s in registry.select(["LD208"], [])] == ["LD508"]
    assert [s.code for s in registry.select(["ld208"], [])] == ["LD508"]
    assert "LD508" not in [s.code for s in registry.select(["LD2"], [])]  # a prefix means today's codes only
    assert "LD508" not in [s.code for s in registry.select(["ALL"], ["LD208"])]


def test_a_later_key_wins_whatever_key_names_the_check():
    spec = load_registry(plugins=False).find("LD101")
    settings = {"requests-queued-before-prefill": {"queue_share": "0.6"}, "ld101": {"queue_share": "0.7"}}
    assert resolve_options(spec, settings)["queue_share"] == 0.7


def test_a_target_option_defaults_to_the_budget_and_set_still_wins():
    spec = load_registry(plugins=False).find("batch-too-deep")
    assert resolve_options(spec, {}, Budgets(tpot_s=0.2))["tpot_target_s"] == 0.2
    assert resolve_options(spec, {"LD203": {"tpot_target_s": "0.08"}}, Budgets(tpot_s=0.2))["tpot_target_s"] == 0.08


def test_the_report_records_the_analysis_by_code_and_leaves_the_input_alone(sample_registry):
    bundle = one_request_bundle()
    options = AnalyzeOptions(settings={"sample-fires-on-success": {"min_ok": "5"}}, budgets=Budgets(0.3, 0.04),
                             select=["TS"], ignore=["TS002"])
    report = analyze(bundle, options, registry=sample_registry)
    recorded = report.bundle.run.analysis
    assert recorded is not None and bundle.run.analysis is None
    assert recorded.settings == {"TS001": {"min_ok": "5"}}
    assert (recorded.ttft_budget_s, recorded.tpot_budget_s, recorded.select, recorded.ignore, recorded.fail_on) == (
        0.3, 0.04, ["TS"], ["TS002"], "felt")


def test_an_alias_clashing_with_a_taken_key_is_refused():
    from doctor.checking.contract import Pass, check
    from doctor.checking.registry import _claims
    from doctor.model import SymptomClass

    @check(code="TS901", name="queue-twin", symptom=SymptomClass.GENERAL, cause="queue", aliases=("queueing",))
    def twin() -> Pass:
        return Pass()

    with pytest.raises(UsageError, match="two checks claim 'queueing'"):
        _claims([*load_registry(plugins=False).checks, twin])


def test_a_raised_not_applicable_is_the_same_result_as_a_returned_one():
    from doctor.checking.contract import NotApplicable, check
    from doctor.checking.runner import run_check
    from doctor.checklib import measured_pair
    from doctor.derive import Evidence
    from doctor.model import SymptomClass

    @check(code="TS900", name="sample-compares-paths", symptom=SymptomClass.PROXY_ONLY, cause="gateway-overhead")
    def compares(stream_stats):
        measured_pair(stream_stats)  # one path only: raises
        raise AssertionError("not reached")

    @check(code="TS901", name="sample-returns-na", symptom=SymptomClass.PROXY_ONLY, cause="gateway-overhead")
    def returns(stream_stats):
        return NotApplicable("needs both the direct (--engine) and the gateway (--gateway) path to compare them")

    raised, returned = (run_check(spec, Evidence(one_request_bundle()), {}) for spec in (compares, returns))
    assert raised.outcome is returned.outcome is Outcome.NOT_APPLICABLE
    assert raised.message == returned.message
