"""Benchmark: ``redact_bundle`` on recorded real-vLLM bundles, with the rules' trigger gate and without.

Not a test (timings are for a person to read). For each bundle it times ``redact_bundle`` as it
is, where a rule runs only on text holding one of its triggers (``doctor/foundation/redact.py``),
and with every rule run on every string, as before the gate (``_candidates`` replaced, as the
reference of tests/collection/test_redact_triggers.py). CPU time, best of ``--repeat`` runs, each
on a fresh copy of the bundle; the two results must be equal, or the script exits 1.

    .venv/bin/python bench/redact_bundle.py                  # realvllm-users-queueing (56 scrapes)
    .venv/bin/python bench/redact_bundle.py fixtures/bundles/*.json.gz

Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.bundle import dumps, load_path  # noqa: E402
from doctor.foundation import redact  # noqa: E402


def best_cpu(bundle: Any, repeat: int) -> tuple[float, Any]:
    """The least CPU time ``redact_bundle`` took over ``repeat`` fresh copies, and its last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        fresh = copy.deepcopy(bundle)
        start = time.process_time()
        out = redact.redact_bundle(fresh)
        best = min(best, time.process_time() - start)
    return best, out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundles", nargs="*", type=Path,
                        default=[ROOT / "fixtures/bundles/realvllm-users-queueing.json.gz"])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"{'bundle':48} {'scrapes':>7} {'text':>9} {'every rule':>11} {'gated':>8} {'ratio':>6}")
    for path in args.bundles:
        bundle = load_path(path)
        scrapes = bundle.metrics.scrapes if bundle.metrics else []
        text_kib = sum(len(s.text) for s in scrapes) / 1024
        with mock.patch.object(redact, "_candidates", lambda value: list(redact.RULES)):
            every, reference = best_cpu(bundle, args.repeat)
        gated, out = best_cpu(bundle, args.repeat)
        if dumps(out) != dumps(reference):
            print(f"{path.name}: the gated redaction differs from every rule's", file=sys.stderr)
            return 1
        print(f"{path.name:48} {len(scrapes):7} {text_kib:7.0f} KiB {every * 1000:8.0f} ms {gated * 1000:5.0f} ms "
              f"{every / gated:5.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
