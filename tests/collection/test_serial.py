"""``serial.load`` types every leaf: a value of the wrong type is a ``TypeError`` naming its field path."""

from __future__ import annotations

import math

import pytest

from doctor.evidence import Bundle, ProbePath
from doctor.foundation.serial import from_jsonable, load, to_jsonable
from doctor.model import Severity
from tests.support import bundles


def sample() -> dict:
    b = bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.2, gaps=[0.03, 0.5])]))
    return to_jsonable(b)


def test_a_good_bundle_round_trips():
    data = sample()
    assert to_jsonable(load(Bundle, data)) == data


@pytest.mark.parametrize(
    "mutate, path",
    [
        (lambda d: d.update(redactions=[1]), "redactions: expected dict"),
        (lambda d: d.update(redactions={"rule": "3"}), "redactions.rule: expected int, got str"),
        (lambda d: d.update(redactions={"rule": True}), "redactions.rule: expected int, got bool"),
        (lambda d: d.update(interrupted=1), "interrupted: expected bool, got int"),
        (lambda d: d.update(run="x"), "run: expected RunRecord, got str"),
        (lambda d: d.update(errors={}), "errors: expected list"),
        (lambda d: d.update(created_at=5), "created_at: expected str, got int"),
        (lambda d: d["run"].update(labels={"a": 1}), "run.labels.a: expected str, got int"),
        (lambda d: d["run"].update(gpu_count="2"), "run.gpu_count: expected int | None, got str"),
        (lambda d: d["run"].update(gpu_count=2.5), "run.gpu_count: expected int | None, got float"),
        (lambda d: d["stream"]["requests"][0]["reads"][1].update(t="0.3"), "stream.requests[0].reads[1].t: expected float, got str"),
        (lambda d: d["stream"]["requests"][0]["reads"][1].update(t=False), "stream.requests[0].reads[1].t: expected float, got bool"),
        (lambda d: d["stream"]["requests"][0].update(t_headers=True), "stream.requests[0].t_headers: expected float | None, got bool"),
        (lambda d: d["stream"]["requests"][0]["tokens"].append(7), "stream.requests[0].tokens[3]: expected TokenEvent, got int"),
        (lambda d: d["stream"]["requests"][0].pop("index"), "stream.requests[0]: RequestTrace.__init__() missing"),
        (lambda d: d["stream"]["requests"][0].update(index=None), "stream.requests[0].index: expected int, got NoneType"),
    ],
)
def test_a_wrong_leaf_names_its_path(mutate, path):
    data = sample()
    mutate(data)
    with pytest.raises(TypeError) as raised:
        load(Bundle, data)
    assert str(raised.value).startswith(path)


def test_ints_are_floats_and_none_is_a_nan_float():
    data = sample()
    data["stream"]["requests"][0]["reads"][0]["t"] = 1
    data["stream"]["duration_s"] = None  # to_jsonable writes NaN as null
    b = load(Bundle, data)
    t = b.stream.requests[0].reads[0].t
    assert t == 1.0 and isinstance(t, float) and math.isnan(b.stream.duration_s)


def test_optional_fields_take_null_and_any_takes_anything():
    data = sample()
    data["run"]["gpu_count"] = None
    data["run"]["engine_config"] = {"x": [1, "a", None, {"b": True}]}
    b = load(Bundle, data)
    assert b.run.gpu_count is None and b.run.engine_config == {"x": [1, "a", None, {"b": True}]}


def test_enums_check_the_value():
    assert from_jsonable(Severity, "warning") is Severity.WARNING
    with pytest.raises(TypeError, match="sev: expected Severity, got str"):
        from_jsonable(Severity, "nope", "sev")
    with pytest.raises(TypeError, match="expected Severity, got int"):
        from_jsonable(Severity, 1)


def test_a_member_not_yet_dumped_reads_back_as_itself():
    """``to_jsonable`` keeps a ``StrEnum`` member (it is a str) until ``json.dumps``: the report's
    in-memory views hold ``ProbePath`` members, which a renderer's ``view`` reads back as they are."""
    assert from_jsonable(ProbePath, to_jsonable(ProbePath.GATEWAY)) is ProbePath.GATEWAY
    with pytest.raises(TypeError, match="expected Severity, got ProbePath"):
        from_jsonable(Severity, ProbePath.GATEWAY)
