"""Every registered check honours the contract (sos's conformance test, ruff's doc check)."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from doctor.check import CAUSES, CODE_RE, DOC_HEADINGS, NAME_RE
from doctor.model import SymptomClass
from doctor.registry import load_registry
from doctor.runner import known_kinds

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
    assert spec.cause in CAUSES
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


def test_codes_and_names_are_unique():
    assert len({s.code for s in SPECS}) == len(SPECS)
    assert len({s.name for s in SPECS}) == len(SPECS)


def test_one_check_per_file():
    files = [inspect.getfile(s.func) for s in SPECS]
    assert len(files) == len(set(files))
