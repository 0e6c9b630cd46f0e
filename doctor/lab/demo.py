"""``llm-doctor demo``'s side of the lab: a running scenario, as the flags ``diagnose`` would get.

Nothing here fakes a verdict: ``lab_overrides`` starts a lab scenario on free ports, writes the
scenario's request body as a ``--payload`` file, and yields the flags that point ``diagnose`` at
it (the lab's log as ``--log``). The ``demo`` command (``doctor.commands.demo``) runs exactly
what ``llm-doctor diagnose`` runs with them (collect -> bundle file -> analyze -> reports); the
lab never calls back into the CLI.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from doctor.foundation.errors import UsageError
from doctor.lab.scenarios import SCENARIOS, Scenario, diagnose_flags, get_scenario, start_lab


def list_scenarios() -> str:
    width = max(len(n) for n in SCENARIOS)
    return "\n".join(
        f"{name:<{width}}  {s.expect.symptom:<15}  {s.description}" for name, s in SCENARIOS.items()
    ) + "\n"


def scenario_named(name: str) -> Scenario:
    """The scenario called ``name``; an unknown name is a usage error that lists the known ones."""
    try:
        return get_scenario(name)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None


@contextmanager
def lab_overrides(spec: Scenario) -> Iterator[dict[str, Any]]:
    """Run ``spec``'s engine and gateway while the block runs; yields the ``diagnose`` flags for them."""
    with tempfile.TemporaryDirectory(prefix="llm-doctor-demo-") as tmp, start_lab(spec, tmp) as lab:
        yield {
            **diagnose_flags(spec, lab.engine_url, lab.gateway_url, Path(tmp)),
            "scrape_interval": 0.5,
            "no_gpu": True,
            "client_location": "localhost (llm-doctor demo)",
        }
