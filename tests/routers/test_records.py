"""Every router record answers every question, and what it names is held by its evidence.

Each quantity and each setting of ``doctor.routers.record`` is either named by the record or said
to be absent with a reason; a record whose product a test runs (``evidence == "run"``) names only
flags its own ``--help`` lists and metric families its real /metrics wrote; a recorded one only
names that its recorded evidence (``fixtures/routers/<id>/``) holds.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor.routers import QUANTITIES, RECORDS, SETTINGS, identify
from doctor.routers.record import RouterRecord

ROOT = Path(__file__).resolve().parents[2]
EVIDENCE = ROOT / "fixtures" / "routers"
CLI = ROOT / "fixtures" / "router-cli"


def _evidence_text(record: RouterRecord) -> str:
    return "\n".join(p.read_text() for p in sorted((EVIDENCE / record.id).glob("*")) if p.is_file())


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_every_quantity_is_named_or_said_absent(record: RouterRecord) -> None:
    assert set(record.metrics) | set(record.lacks) == set(QUANTITIES)
    assert not set(record.metrics) & set(record.lacks), "a quantity both named and said absent"
    assert all(why.strip() for why in record.lacks.values())


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_every_setting_is_spelled_or_said_absent(record: RouterRecord) -> None:
    assert set(record.settings) | set(record.no_settings) == set(SETTINGS)
    assert not set(record.settings) & set(record.no_settings)
    assert all(why.strip() for why in record.no_settings.values())
    for setting in record.settings.values():
        if setting.logged is not None:
            assert re.compile(setting.logged).groups == 1


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.id)
def test_metric_names_are_the_products_own(record: RouterRecord) -> None:
    held = _evidence_text(record)
    for quantity, name in record.metrics.items():
        assert record.names(name), f"{quantity}: {name} does not start with the record's prefixes"
        assert name in held, f"{record.id} {quantity}: {name} is in none of fixtures/routers/{record.id}/"
    assert identify(record.metrics.values()) is record
    assert record.docs and record.evidence in ("run", "recorded")


@pytest.mark.parametrize("record", [r for r in RECORDS if r.evidence == "run"], ids=lambda r: r.id)
def test_a_run_records_flags_are_in_its_own_help(record: RouterRecord) -> None:
    help_text = (CLI / f"{record.id}.txt").read_text()
    for key, setting in record.settings.items():
        assert re.search(rf"{re.escape(setting.flag)}\b", help_text), f"{key}: {setting.flag} is not in {record.id} --help"


def test_the_logged_settings_read_the_real_startup_log() -> None:
    vllm_router = next(r for r in RECORDS if r.id == "vllm-router")
    log = (EVIDENCE / "vllm-router" / "startup-round-robin.log").read_text()
    found = {key: m.group(1) for key, s in vllm_router.settings.items() if s.logged and (m := re.search(s.logged, log))}
    assert found == {"policy": "RoundRobin", "queue_size": "100", "queue_timeout": "60", "health_interval": "60"}


def test_nothing_a_router_did_not_write_names_one() -> None:
    assert identify(["vllm:num_requests_waiting", "process_cpu_seconds_total"]) is None
