"""Untrusted manifest text: bounded, templated, placeholdered, listed, and read by every record."""

from __future__ import annotations

import pytest

from doctor.scalers import RECORDS, read_documents
from doctor.scalers.manifests import MAX_NODES, ManifestError, documents
from doctor.scalers.promql import read_query

HPA = """apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: vllm, namespace: serving}
spec:
  scaleTargetRef: {kind: Deployment, name: vllm}
  minReplicas: ${MIN_REPLICAS}
  maxReplicas: 4
  metrics:
  - type: Resource
    resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
"""


def test_a_placeholder_is_an_unknown_value_and_the_other_rules_still_read() -> None:
    (scaler,) = read_documents(documents(HPA, "hpa.yaml")).scalers
    assert scaler.floor is not None and not scaler.floor.known and scaler.floor.placeholder == "${MIN_REPLICAS}"
    assert scaler.placeholders == ["spec.minReplicas = ${MIN_REPLICAS} (unknown until rendered)"]
    assert scaler.signals[0].metric == "cpu"


def test_a_list_and_several_documents_are_every_object_with_where_it_was() -> None:
    listed = "apiVersion: v1\nkind: List\nitems:\n" + "".join(f"- {line}\n" if i == 0 else f"  {line}\n"
                                                              for i, line in enumerate(HPA.replace("${MIN_REPLICAS}", "1").splitlines()))
    docs = documents(listed + "---\n" + HPA, "all.yaml")
    assert [d.source for d in docs] == ["all.yaml#1 items[0]", "all.yaml#2"]
    assert [d.kind for d in docs] == ["HorizontalPodAutoscaler"] * 2


def test_an_alias_bomb_is_refused_before_it_is_built() -> None:
    levels = ["a: &a [x, x, x, x, x, x, x, x, x]"] + [f"{c}: &{c} [{', '.join(['*' + p] * 9)}]"
                                                      for p, c in zip("abcdefg", "bcdefgh", strict=True)]
    with pytest.raises(ManifestError, match=str(MAX_NODES)):
        documents("\n".join(levels) + "\n", "bomb.yaml")


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "a: [1, 2\n", "{{ .Values.x }}: 1\n"])
def test_text_that_cannot_be_read_is_one_message(text: str) -> None:
    with pytest.raises(ManifestError):
        documents(text, "bad.yaml")


def test_prometheus_alert_templates_are_yaml_not_helm() -> None:
    text = 'groups:\n- rules:\n  - alert: X\n    annotations: {summary: "{{ $labels.pod }}{{ with $value }}{{ . }}{{ end }}"}\n'
    assert documents(text, "alerts.yaml") == []  # read without error: no object of a kind


def test_every_record_answers_the_same_questions() -> None:
    """A family is a record: each product says how it reads, what it lists live, its defaults,
    where its fields are documented and how a queue-depth signal is written in its words."""
    for record in RECORDS:
        assert record.kinds and record.resources and record.docs.startswith("https://") and record.defaults, record.id
        assert "{metric}" in record.queue_signal or record.id in ("ray-serve",), record.id


@pytest.mark.parametrize(("query", "sums", "rated"), [
    ("sum(vllm:num_requests_waiting)", True, False),
    ("sum by (pod) (vllm:num_requests_waiting)", False, False),
    ("avg(vllm:num_requests_waiting)", False, False),
    ("sum(rate(vllm:request_success_total[2m])) / 4", True, True),
])
def test_a_query_is_read_as_prometheus_parses_it(query: str, sums: bool, rated: bool) -> None:
    shape = read_query(query)
    assert (shape.sums_replicas, shape.selections[0].rated) == (sums, rated)
