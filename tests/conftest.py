"""Fixtures shared by several test modules."""

from __future__ import annotations

import pytest

from doctor.bundle import save
from tests.support import bundles
from tests.support.lab_runs import DemoRun, LabDiagnoses, run_demo


@pytest.fixture
def saved_bundle(tmp_path):
    """A small saved bundle: four healthy direct requests."""
    path = tmp_path / "bundle.json"
    reqs = [bundles.request("direct", i, ttft=0.1, gaps=[0.02] * 8, start=i * 0.5) for i in range(4)]
    save(bundles.bundle(stream=bundles.stream(reqs)), path)
    return path


@pytest.fixture(scope="session")
def lab_diagnoses(tmp_path_factory) -> LabDiagnoses:
    """Each lab scenario diagnosed once per session, on first use: ``lab_diagnoses("kv-pressure")``."""
    return LabDiagnoses(tmp_path_factory.mktemp("lab-diagnoses"))


@pytest.fixture(scope="session")
def narrow_demo(tmp_path_factory) -> DemoRun:
    """``llm-doctor demo`` with an output flag, run once per session under an ASCII terminal."""
    return run_demo(tmp_path_factory.mktemp("demo"))


def pytest_addoption(parser):
    parser.addoption(
        "--update-snapshots", action="store_true", default=False,
        help="rewrite each check fixture's .snap (fixtures/checks/*/*.snap) from the check's result instead of "
             "comparing with it; review the diff before committing",
    )


@pytest.fixture
def update_snapshots(request) -> bool:
    """Whether this run rewrites snapshots (``pytest --update-snapshots``) rather than asserting them."""
    return bool(request.config.getoption("--update-snapshots"))
