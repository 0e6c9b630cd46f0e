"""Every registered check honours the contract (sos's conformance test, ruff's doc check)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from doctor.checking.contract import CODE_RE, DOC_HEADINGS, NAME_RE, OPTIONS_HEADING, CheckSpec, Pass, check
from doctor.checking.registry import load_registry
from doctor.checking.runner import known_kinds
from doctor.model import Cause, SymptomClass

REGISTRY = load_registry(plugins=False)
SPECS = REGISTRY.checks


def test_there_are_real_checks():
    assert len(SPECS) >= 1


@pytest.mark.parametrize("spec", SPECS, ids=[s.code for s in SPECS])
def test_check_contract(spec):
    assert CODE_RE.match(spec.code), spec.code
    assert NAME_RE.match(spec.name), spec.name
    assert Path(inspect.getfile(spec.func)).stem == spec.name.replace("-", "_"), "file name must be the check name"
    assert isinstance(spec.symptom, SymptomClass)
    assert isinstance(spec.cause, Cause), f"{spec.code}: cause {spec.cause!r} is not a Cause"
    for heading in DOC_HEADINGS:
        assert spec.doc.get(heading), f"{spec.code}: docstring lacks '{heading}:'"
    kinds = known_kinds()
    for kind in (*spec.requires, *spec.optional):
        assert kind in kinds, f"{spec.code} asks for unknown evidence {kind!r}"
    # a check that needs any one of several kinds (the probe's streams or the server's histograms)
    # declares them all optional and says itself which it found
    assert spec.requires or len(spec.optional) >= 2, f"{spec.code} declares no required evidence"
    for option, default in spec.options.items():
        assert default is not None and not isinstance(default, (list, dict)), f"{spec.code}.{option} needs a scalar default"


@pytest.mark.parametrize("spec", SPECS, ids=[s.code for s in SPECS])
def test_options_heading_describes_every_option(spec):
    """``Options:`` lists each keyword-only option once, with what it means, and nothing else."""
    if not spec.options:
        assert OPTIONS_HEADING not in spec.doc, f"{spec.code} has no options: drop its '{OPTIONS_HEADING}:' heading"
        return
    described = spec.option_docs
    assert list(described) == list(spec.options), f"{spec.code}: '{OPTIONS_HEADING}:' must list {list(spec.options)} in order"
    for option, text in described.items():
        assert text, f"{spec.code}.{option} has no description"


#: The hundreds digit of a code is its symptom class (DEVELOPERS.md, "Adding a check").
CODE_CLASS = {
    "1": SymptomClass.PRE_FIRST_TOKEN,
    "2": SymptomClass.INTER_TOKEN,
    "3": SymptomClass.PROXY_ONLY,
    "4": SymptomClass.CAPACITY_CONFIG,
    "5": SymptomClass.GENERAL,
    "6": SymptomClass.SCALING,
}


@pytest.mark.parametrize("spec", SPECS, ids=[s.code for s in SPECS])
def test_code_hundreds_digit_is_the_symptom_class(spec):
    digit = next(k for k, v in CODE_CLASS.items() if v is spec.symptom)
    assert spec.code[2] == digit, f"{spec.code} is {spec.symptom.value}: its code must be LD{digit}xx"


def test_codes_and_names_are_unique():
    assert len({s.code for s in SPECS}) == len(SPECS)
    assert len({s.name for s in SPECS}) == len(SPECS)


def test_one_check_per_file():
    files = [inspect.getfile(s.func) for s in SPECS]
    assert len(files) == len(set(files))


def test_an_unknown_cause_is_refused_when_the_check_is_declared():
    with pytest.raises(ValueError, match="unknown cause 'queueing'; known: queue, prefill"):
        check(code="XT900", name="bad-cause", symptom=SymptomClass.GENERAL, cause="queueing")


def test_a_cause_given_as_its_string_becomes_the_enum():
    """Plugins written before the enum pass the string; the spec holds the member all the same."""
    spec = check(code="XT901", name="string-cause", symptom=SymptomClass.GENERAL, cause="queue")(lambda run: Pass())
    assert spec.cause is Cause.QUEUE


def test_a_hand_built_spec_with_an_unknown_cause_is_refused():
    """A plugin may expose a ``CheckSpec`` it built without ``check``: the cause is checked there too."""
    with pytest.raises(ValueError, match="XT902: unknown cause 'nope'"):
        CheckSpec(code="XT902", name="hand-built", symptom=SymptomClass.GENERAL, cause="nope",  # type: ignore[arg-type]
                  func=lambda run: Pass(), requires=("run",), optional=(), options={}, doc={}, module=__name__)
