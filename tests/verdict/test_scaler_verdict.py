"""The verdict and the autoscaler (docs/scaling.md): a real queueing incident (the recorded
real-vLLM bundle, other users' load) beside an HPA stuck at its ceiling.

A replica below its knee keeps the engine's own knob (LD101, ``max_num_seqs``) and says the scaler
beside it; a queue that load alone explains (LD101 not in the analysis, as for a replica already
at its knee) gets the scaler's field, which would have brought the replica users waited for.
"""

from __future__ import annotations

from doctor.model import Symptom
from tests.support.scaler_incident import incident


def test_below_its_knee_the_engines_knob_decides_and_the_scaler_is_said_beside_it() -> None:
    verdict = incident().verdict
    assert (verdict.symptom, verdict.primary_code) == (Symptom.PRE_FIRST_TOKEN, "LD101")
    assert any(line.startswith("the autoscaler did not add a replica either: LD609 stuck-at-max") for line in verdict.reasoning)


def test_a_queue_of_load_alone_gets_the_scalers_field() -> None:
    verdict = incident(ignore=("LD101",)).verdict
    assert verdict.symptom is Symptom.PRE_FIRST_TOKEN
    assert verdict.primary_code == "LD609" and verdict.primary_remediation is not None
    assert verdict.primary_remediation.setting == "spec.maxReplicas"
    assert not any("did not add a replica either" in line for line in verdict.reasoning)


def test_without_a_scaler_the_queue_of_load_alone_adds_replicas_as_before() -> None:
    verdict = incident(scaler=False, ignore=("LD101",)).verdict
    assert verdict.primary_remediation is not None and verdict.primary_code != "LD609"
