"""Benchmark: ``analyze`` of recorded real-vLLM bundles, each exposition parsed once and parsed per reader.

Not a test (timings are for a person to read). For each bundle it times the analysis (checks,
verdict, views) as it is, where ``metric_names.metric_families`` keeps each exposition text's
parse, and with that memo bypassed (every reader parses every scrape again, as before). CPU time,
best of ``--repeat`` runs, each on a fresh load of the bundle with the memo emptied first; the two
reports (less their times) must be equal, or the script exits 1.

    .venv/bin/python bench/analyze_bundle.py                  # realvllm-users-queueing
    .venv/bin/python bench/analyze_bundle.py fixtures/bundles/*.json.gz

Results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from doctor.bundle import load_path  # noqa: E402
from doctor.checking.registry import load_registry  # noqa: E402
from doctor.checking.runner import analyze  # noqa: E402
from doctor.engine_metrics import metric_names  # noqa: E402
from doctor.foundation.serial import to_jsonable  # noqa: E402

#: The memoised parse, kept here: the "before" run puts the bare function in its place.
PARSE = metric_names.metric_families


def best_cpu(path: Path, repeat: int) -> tuple[float, int, str]:
    """The least CPU time ``analyze`` took over ``repeat`` fresh loads, the parses of the last run and its report."""
    registry = load_registry()
    best, parses, report = float("inf"), 0, ""
    for _ in range(repeat):
        bundle = load_path(path)
        PARSE.cache_clear()
        start = time.process_time()
        result = analyze(bundle, None, registry)
        best = min(best, time.process_time() - start)
        parses = PARSE.cache_info().misses
        report = json.dumps(_timeless(to_jsonable(result)), sort_keys=True, default=str)
    return best, parses, report


def _timeless(doc: object) -> object:
    """The report without what differs run to run: when it was made, and each check's own run time."""
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k not in ("duration_ms", "generated_at")}
    if isinstance(doc, list):
        return [_timeless(v) for v in doc]
    return doc


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundles", nargs="*", type=Path,
                        default=[ROOT / "fixtures" / "bundles" / "realvllm-users-queueing.json.gz"])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print("| recorded bundle | scrapes | parsed per reader (before) | parsed once (after) | ratio |")
    print("|---|---:|---:|---:|---:|")
    failed = False
    for path in args.bundles:
        metrics = load_path(path).metrics
        scrapes = len(metrics.scrapes) if metrics is not None else 0
        once, parses_once, report_once = best_cpu(path, args.repeat)
        with contextlib.ExitStack() as stack:  # every module that took the name, not only its own
            for module in [m for m in list(sys.modules.values()) if getattr(m, "metric_families", None) is PARSE]:
                stack.enter_context(mock.patch.object(module, "metric_families", PARSE.__wrapped__))
            each, _, report_each = best_cpu(path, args.repeat)
        if report_once != report_each:
            print(f"{path.name}: the reports differ", file=sys.stderr)
            failed = True
        print(f"| `{path.name.removesuffix('.json.gz')}` | {scrapes} ({parses_once} parses) | {each * 1000:.0f} ms "
              f"| {once * 1000:.0f} ms | {each / once:.1f}x |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
