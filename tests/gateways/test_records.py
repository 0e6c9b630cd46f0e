"""Every gateway record answers every behaviour, and the tables derived from the records hold.

Each behaviour of ``doctor.gateways.record.BEHAVIOURS`` is, for every family, a row (a ``Phrasing``,
an ``IdleTimeout`` for the idle timeout) or ``NoSwitch`` with a reason; a row's templates fill only
the placeholders its behaviour's remediation fills; a family's tokens and ``--gateway-kind`` word
name it and no other; rows another family shares are that family's own objects. The remediations
that read the rows are held by ``tests/derive/test_gateways.py`` and the check snapshots.
"""

from __future__ import annotations

import importlib
import pkgutil
import re

import pytest

from doctor.checklib import buffering_remediation
from doctor.derive.gateway import identify
from doctor.gateways import (
    BEHAVIOURS,
    BY_ID,
    KINDS,
    RECORDS,
    TELL_HEADERS,
    GatewayRecord,
    IdleTimeout,
    NoSwitch,
    Phrasing,
    family_of,
    suspects,
)

#: The placeholders each behaviour's remediation fills in a row's ``where`` / ``why``.
FILLED = {"buffering": {"name", "burst"}, "compression": {"name", "enc"}, "response_start": {"name"},
          "connection_cap": {"name"}, "retries": {"name", "timeout"}, "connect_timeout": {"name"}}


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_every_family_answers_every_behaviour(record: GatewayRecord) -> None:
    for behaviour in BEHAVIOURS:
        row = getattr(record, behaviour)
        expected = IdleTimeout if behaviour == "idle_timeout" else Phrasing
        assert isinstance(row, (expected, NoSwitch)), f"{record.id} {behaviour}: {row!r}"
        if isinstance(row, NoSwitch):
            assert row.why.strip(), f"{record.id} {behaviour}: no switch, and no reason"


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_a_rows_templates_hold_only_what_its_remediation_fills(record: GatewayRecord) -> None:
    rows = [(b, getattr(record, b)) for b in FILLED]
    rows += [("response_start", record.uncompressed_start), ("connection_cap", record.refusing_cap)]  # the variants
    for behaviour, row in rows:
        if isinstance(row, Phrasing):
            used = set(re.findall(r"\{([a-z_]+)\}", row.where + row.why))
            assert used <= FILLED[behaviour], f"{record.id} {behaviour}: {used - FILLED[behaviour]} is never filled"
    if isinstance(record.idle_timeout, IdleTimeout):
        record.idle_timeout.where.format(s="300")  # filled by str.format: a stray brace would raise


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_a_familys_words_name_it(record: GatewayRecord) -> None:
    assert record.tokens and record.display
    assert all(family_of(token) == record.id for token in record.tokens), "a token another family's matches first"
    assert family_of(record.kind) == record.id
    assert identify([{}], record.kind).primary.family == record.id


def test_every_family_module_is_a_record_of_the_registry() -> None:
    import doctor.gateways as package

    modules = [m.name for m in pkgutil.iter_modules(package.__path__) if m.name != "record"]
    assert modules and all(importlib.import_module(f"doctor.gateways.{m}").RECORD in RECORDS for m in modules)
    assert len(modules) == len(RECORDS)


def test_the_help_offers_every_family_once() -> None:
    assert len(KINDS) == len(set(KINDS)) == len(RECORDS)
    assert len(BY_ID) == len(RECORDS)


def test_a_shared_row_is_the_families_own() -> None:
    for record in (r for r in RECORDS if r.shares is not None):
        owner = BY_ID[record.shares]
        shared = [b for b in BEHAVIOURS if getattr(record, b) is getattr(owner, b)]
        assert shared, f"{record.id} shares {owner.id}'s rows but holds none of them"


def test_tell_headers_name_their_family_in_a_response() -> None:
    for name, family in TELL_HEADERS:
        gw = identify([{name + ("x" if name.endswith("-") else ""): "1"}])
        assert gw.hop(family) is not None, name


def test_the_usual_suspects_are_the_rows_that_say_so() -> None:
    for behaviour in BEHAVIOURS:
        named = suspects(behaviour)
        rows = {getattr(r, behaviour) for r in RECORDS if not isinstance(getattr(r, behaviour), NoSwitch)}
        assert len(named) == len({row for row in rows if row.suspect is not None})
    assert suspects("connect_timeout")[0] == "nginx `proxy_connect_timeout` (60 s default)"  # a row's default beside it
    assert "Envoy / Envoy AI Gateway `connect_timeout`" in suspects("connect_timeout")  # a shared row once


def test_a_new_familys_rows_are_read_without_a_table() -> None:
    # the remediation reads the record: a family's row is what the advice names
    gw = identify([{"server": "lighttpd/1.4.69"}])
    lighttpd = BY_ID["lighttpd"]
    assert isinstance(lighttpd.buffering, Phrasing)
    assert buffering_remediation(gw, "bursts", "re-run").setting == lighttpd.buffering.setting


@pytest.mark.parametrize(("value", "family"), [
    ("kong-ai-gateway", "kong"),  # Kong's AI gateway, not Envoy's
    ("envoy-ai-gateway", "envoy-ai-gateway"),
    ("1.1 envoy, 1.1 kong", "kong"),
    ("uvicorn litellm", "litellm"),  # LiteLLM's proxy runs on uvicorn: the proxy is what answers
    ("ingress-nginx", "ingress-nginx"),
])
def test_a_value_naming_two_families_is_the_one_the_registry_order_says(value: str, family: str) -> None:
    """``RECORDS`` orders both the words tried and the hops tell headers add: reordering it for one
    reason must not silently change which family a value naming two of them is."""
    assert family_of(value) == family
