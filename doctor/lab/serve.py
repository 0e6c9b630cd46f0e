"""Run a lab scenario's engine and gateway in this process until stdin closes.

``start_lab`` starts this module as a child process so that the lab's threads never compete
with the probe for the parent's GIL (the probe's event-loop lag would then be the lab's doing).
The scenario arrives as JSON on the command line; the child prints one JSON line with the URLs
once both servers listen, and shuts down when its stdin reaches end of file, which also happens
when the parent dies.

Also handy by hand (the README's "Try it"): ``python -m doctor.lab.serve kv-pressure /tmp/lab``
prints the URLs and, under ``diagnose``, the flags that show the scenario's symptom
(``scenarios.diagnose_flags``: its concurrency, requests and request body, which the defaults
lack), and serves until Ctrl-D.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from doctor.lab.scenarios import as_arguments, diagnose_flags, get_scenario
from doctor.lab.servers import servers_spec, start_servers, stop_servers


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python -m doctor.lab.serve SCENARIO|SPEC_JSON WORKDIR\n")
        return 2
    what, workdir = argv
    scenario = None if what.lstrip().startswith("{") else get_scenario(what)
    spec = json.loads(what if scenario is None else servers_spec(scenario.engine, scenario.gateway, scenario.background))
    Path(workdir).mkdir(parents=True, exist_ok=True)
    engine, gateway = start_servers(spec, Path(workdir))
    try:
        urls: dict[str, str] = {"engine": engine.url, "gateway": gateway.url}
        if scenario is not None:
            flags = diagnose_flags(scenario, engine.url, gateway.url, Path(workdir).resolve())
            urls["diagnose"] = shlex.join(as_arguments(flags))
        sys.stdout.write(json.dumps(urls) + "\n")
        sys.stdout.flush()
        sys.stdin.read()  # until the parent closes our stdin, or dies
    finally:
        stop_servers(engine, gateway)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
