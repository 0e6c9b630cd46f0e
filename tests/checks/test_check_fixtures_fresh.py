"""The committed check fixtures are what their generators write today, and nothing else.

Fixtures are generated (``python -m tests.support.make_check_fixtures_*``), never edited by hand.
This test regenerates every case into a temporary folder and compares, so a hand edit, a
generator change without a re-run, or a case left behind by a renamed check fails here.
"""

from __future__ import annotations

import importlib

from doctor.checking.registry import load_registry
from tests.support.write_fixture import FIXTURES, GENERATORS, case_functions, writing_into


def test_generators_reproduce_the_committed_fixtures(tmp_path) -> None:
    for generator in GENERATORS:
        for check, make in case_functions(importlib.import_module(generator)).items():
            with writing_into(tmp_path / check):
                make()
            written = sorted(p.name for p in (tmp_path / check).iterdir())
            assert written == [check.replace("_", "-")], f"{generator}.cases_{check} wrote {written}, not its own check's folder"
    made = {p.relative_to(tmp_path).parts[1:]: p.read_text() for p in tmp_path.glob("*/*/*.json")}
    committed = {p.relative_to(FIXTURES).parts: p.read_text() for p in FIXTURES.glob("*/*.json")}
    assert sorted(committed.keys() - made.keys()) == [], "committed cases no generator writes (delete them)"
    assert sorted(made.keys() - committed.keys()) == [], "generated cases not committed (run the generators)"
    stale = sorted("/".join(key) for key, text in made.items() if committed[key] != text)
    assert stale == [], "fixtures differ from their generators: run `python -m tests.support.make_check_fixtures_*`"


def test_every_check_has_one_cases_function() -> None:
    """Adding a check is one check file, one ``cases_<check>`` function, one generated folder."""
    owners: dict[str, list[str]] = {}
    for generator in GENERATORS:
        for check in case_functions(importlib.import_module(generator)):
            owners.setdefault(check, []).append(generator)
    names = {spec.name.replace("-", "_") for spec in load_registry(plugins=False).checks}
    assert sorted(owners.keys() - names) == [], "cases_* functions that name no check"
    assert sorted(names - owners.keys()) == [], "checks without a cases_* function"
    assert {c: g for c, g in owners.items() if len(g) > 1} == {}, "a check's cases are written by two generators"
