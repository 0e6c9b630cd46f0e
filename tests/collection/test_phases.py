"""The collector's declaration (``doctor.collection.phases``): each step writes a real bundle field,
and the order the module docstring of the collector argues for is the order declared."""

from __future__ import annotations

from dataclasses import fields

from doctor.collection.gathering import Step
from doctor.collection.phases import AFTER, AROUND, BEFORE, FINISH, ON_INTERRUPT, PHASES, RECORD
from doctor.evidence import Bundle


def steps() -> list[Step]:
    declared = [s for phase in PHASES for s in (phase.gate, *phase.steps) if isinstance(s, Step)]
    return [*declared, *FINISH, *ON_INTERRUPT, RECORD]


def test_each_step_writes_a_field_of_the_bundle():
    # setattr on a misspelt field would keep the evidence nowhere a reader looks
    names = {f.name for f in fields(Bundle)}
    assert [s.name for s in steps() if s.writes is not None and s.writes not in names] == []


def test_a_step_is_bounded_one_way_and_named_once():
    assert [s.name for s in steps() if s.grant_s is not None and s.give_s is not None] == []
    declared = [s.name for phase in PHASES for s in (phase.gate, *phase.steps) if isinstance(s, Step)]
    assert len(declared) == len(set(declared))


def test_the_stream_is_bracketed_by_one_scrape_before_and_one_after():
    names = {phase.name: [s.name for s in phase.steps if isinstance(s, Step)] for phase in PHASES}
    assert names[BEFORE.name][-2:] == ["metrics before", "router before"]
    assert AROUND.gate is not None and AROUND.gate.name == "stream"
    assert names[AFTER.name][:2] == ["metrics after", "router after"]
    # the trace store is read after the scrapes (its wait is not in their deltas), the past last
    assert names[AFTER.name].index("trace store") > names[AFTER.name].index("router after")
    assert names[AFTER.name][-1] == "prometheus"
