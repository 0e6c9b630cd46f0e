"""Fuzzing campaign through the CLI's own entry points, seeded with the fixtures: crashes and super-linear paths.

Each target is a command a user runs on a file from outside: ``log`` (``llm-doctor log FILE
--json``; seeds: every log under ``fixtures/logs`` and ``fixtures/engines``), ``metrics``
(``llm-doctor metrics FILE --json``; ``fixtures/metrics/*.prom``), ``analyze`` (``llm-doctor
analyze BUNDLE --html --json``; ``fixtures/bundles``) and ``config`` (``llm-doctor analyze BUNDLE
--config FILE``; the config documented in ``doctor/settings/config_file.py``). Each input is a seed mutated a
few times: a number replaced by a hostile one (past ``int()``'s 4,300 digits, past a float's
range, NaN), a run that a backtracking pattern reads from every position, a line repeated or
lengthened, a line of another seed, random bytes. A bundle is mutated as JSON (a number or a
string in place of another), so it stays a bundle to analyse.

- A crash is any exception out of the command (its exit codes 0, 1 and 2 are answers).
- A super-linear path: an input whose run took over ``--slow`` seconds is grown four times over
  (its longest line's tail repeated, and the whole file repeated); when the time (best of two
  runs each, so a loaded machine's noise is not a finding) grows more than ``--limit`` times as
  fast as the input (over 8x for the 4x input, as in ``bench/pathological.py``), it is reported.

Every finding is saved under ``--out`` (the input, and the traceback or the two times); the
script exits 1 when it found any. Not a test: the tests hold the bounded, deterministic part of
the campaign (``tests/parsers/test_fuzz.py``, the ``ci`` profile). Results: docs/benchmarks.md.

    .venv/bin/python bench/fuzz.py --seconds 300             # every target, 300 s each
    .venv/bin/python bench/fuzz.py --only log --seed 7 --seconds 60
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import random
import re
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from typer.testing import CliRunner  # noqa: E402

from doctor.cli import app  # noqa: E402
from doctor.commands.log import log_command_output  # noqa: E402
from doctor.commands.metrics import metrics_command_output  # noqa: E402

FIXTURES = ROOT / "fixtures"
HOSTILE_NUMBERS = ["9" * 4400, "1" + "0" * 400, "1e400", "-1", "0", "nan", "inf", "1" * 40, "1e-400", "-0.0"]
HOSTILE_RUNS = ["a" * 4000, "[REDACTED]a" * 300, "build info |" * 300, '\\"' * 2000, "Error: " * 500, "a." * 2000,
                " " * 4000, "█" * 1000, "{" * 500, "x-envoy-1: 1\n" * 200, "authorization: ", "\ud800"]
CONFIG_SEED = """[targets]\nengine = "http://127.0.0.1:8000"\n\n[probe]\nroute = "chat"\nconcurrency = 4\nrequests = 20\n
[budgets]\nttft = 0.5\ntpot = 0.05\n[budgets.regions.eu-west-1]\nttft = 0.8\n\n[run]\nprovider = "aws"\n
[checks.LD101]\nqueue_share = 0.6\n\n[analysis]\nfail_on = "warning"\nignore = ["LD5"]\n"""
_NUMBER = re.compile(rb"\d+(?:\.\d+)?")
GROWTH = 4  # how many times a slow input is grown to time its growth


def mutate_text(data: bytes, seeds: list[bytes], rnd: random.Random) -> bytes:
    """``data`` with one to four mutations of the kinds the module docstring lists."""
    for _ in range(rnd.randint(1, 4)):
        kind = rnd.randrange(6)
        lines = data.split(b"\n")
        i = rnd.randrange(len(lines))
        if kind == 0 and (numbers := list(_NUMBER.finditer(data))):
            m = rnd.choice(numbers)
            data = data[:m.start()] + rnd.choice(HOSTILE_NUMBERS).encode() + data[m.end():]
        elif kind == 1:
            lines[i] += rnd.choice(HOSTILE_RUNS).encode("utf-8", "surrogatepass")
            data = b"\n".join(lines)
        elif kind == 2:
            lines[i:i + 1] = [lines[i]] * rnd.choice([2, 50, 1000])
            data = b"\n".join(lines)
        elif kind == 3:
            lines[i] = rnd.choice(rnd.choice(seeds).split(b"\n"))
            data = b"\n".join(lines)
        elif kind == 4 and data:
            for _ in range(rnd.randint(1, 8)):
                j = rnd.randrange(len(data))
                data = data[:j] + bytes([rnd.randrange(256)]) + data[j + 1:]
        else:
            data = data[: rnd.randrange(len(data) + 1)]
    return data


def mutate_json(doc: object, rnd: random.Random) -> object:
    """``doc`` with a few numbers and strings replaced by hostile ones, at random depths."""
    places: list[tuple[object, object]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for key in keys:
            value = node[key]  # type: ignore[index]
            if isinstance(value, (dict, list)):
                stack.append(value)
            elif isinstance(value, (int, float, str)) and not isinstance(value, bool):
                places.append((node, key))
    for node, key in rnd.sample(places, min(len(places), rnd.randint(1, 6))):
        value = node[key]  # type: ignore[index]
        if isinstance(value, str):
            new: object = rnd.choice(HOSTILE_RUNS) if rnd.random() < 0.7 else rnd.choice([0, -1, 10**400])
        else:
            new = rnd.choice([10**400, -(10**300), -1, 0, 2**64, 1e300, -1e-300, 10**4000])
        node[key] = new  # type: ignore[index]
    return doc


class Target:
    """A command, its seeds and its mutation."""

    def __init__(self, name: str, seeds: list[bytes], run: Callable[[Path], None], mutate: Callable[[bytes, random.Random], bytes],
                 suffix: str) -> None:
        self.name, self.seeds, self.run, self.mutate, self.suffix = name, seeds, run, mutate, suffix


def _files(*patterns: str) -> list[bytes]:
    out = []
    for pattern in patterns:
        for path in sorted(FIXTURES.glob(pattern)):
            data = path.read_bytes()
            out.append(gzip.decompress(data) if path.suffix == ".gz" else data)
    return out


def _cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if result.exit_code not in (0, 1, 2):
        raise RuntimeError(f"exit code {result.exit_code}: {result.output[-300:]}")


def targets(bundle: Path) -> dict[str, Target]:
    def log(path: Path) -> None:
        output = log_command_output(str(path), as_json=True)
        if output.text:
            json.loads(output.text)

    def metrics(path: Path) -> None:
        json.loads(metrics_command_output([str(path)], as_json=True)[0])

    def analyze(path: Path) -> None:
        _cli("analyze", str(path), "--html", str(path.with_suffix(".html")), "--json", str(path.with_suffix(".out.json")))

    def config(path: Path) -> None:
        _cli("analyze", str(bundle), "--config", str(path))

    def bundle_mutation(data: bytes, rnd: random.Random) -> bytes:
        doc = mutate_json(json.loads(data), rnd)
        with contextlib.suppress(ValueError):  # an integer past 4,300 digits cannot be written: keep 10**400s
            return json.dumps(doc).encode()
        return data

    logs = _files("logs/*.log", "logs/*/*.log", "engines/*/*.log")
    scrapes = _files("metrics/*.prom")
    bundles = _files("bundles/*.json.gz")[:4]
    return {
        "log": Target("log", logs, log, lambda d, r: mutate_text(d, logs, r), ".log"),
        "metrics": Target("metrics", scrapes, metrics, lambda d, r: mutate_text(d, scrapes, r), ".prom"),
        "analyze": Target("analyze", bundles, analyze, bundle_mutation, ".json"),
        "config": Target("config", [CONFIG_SEED.encode()], config, lambda d, r: mutate_text(d, [CONFIG_SEED.encode()], r), ".toml"),
    }


def timed(target: Target, data: bytes, tmp: Path) -> float:
    path = tmp / f"input{target.suffix}"
    path.write_bytes(data)
    start = time.perf_counter()
    target.run(path)
    return time.perf_counter() - start


def grown(data: bytes, factor: int) -> list[bytes]:
    """``data`` grown ``factor`` times two ways: its longest line's second half repeated, the whole file repeated."""
    lines = data.split(b"\n")
    i = max(range(len(lines)), key=lambda k: len(lines[k]))
    half = len(lines[i]) // 2
    longer = [*lines[:i], lines[i][:half] + lines[i][half:] * factor, *lines[i + 1:]]
    return [b"\n".join(longer), data * factor]


def campaign(target: Target, seconds: float, rnd: random.Random, out: Path, slow: float, limit: float) -> tuple[int, list[str]]:
    findings: list[str] = []
    seen: set[str] = set()
    runs = 0
    end = time.monotonic() + seconds
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        while time.monotonic() < end:
            data = target.mutate(rnd.choice(target.seeds), rnd)
            runs += 1
            try:
                took = timed(target, data, tmp)
                if took > slow:
                    for big in grown(data, GROWTH):
                        t1 = min(timed(target, data, tmp) for _ in range(2))
                        t2 = min(timed(target, big, tmp) for _ in range(2))
                        if t2 > limit * GROWTH * t1:
                            key = f"slow-{len(findings)}"
                            (out / f"{target.name}-{key}{target.suffix}").write_bytes(big)
                            findings.append(f"{target.name}: {GROWTH}x the input took {t1:.2f} s -> {t2:.2f} s ({key})")
            except Exception as exc:  # noqa: BLE001 - every exception out of a command is a finding
                frame = traceback.extract_tb(exc.__traceback__)[-1]
                key = f"{type(exc).__name__}@{Path(frame.filename).name}:{frame.lineno}"
                if key not in seen:
                    seen.add(key)
                    (out / f"{target.name}-{key.replace(':', '_')}{target.suffix}").write_bytes(data)
                    findings.append(f"{target.name}: {key}: {str(exc)[:120]}")
    return runs, findings


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=120, help="time per target")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", action="append", choices=["log", "metrics", "analyze", "config"])
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "llm-doctor-fuzz")
    ap.add_argument("--slow", type=float, default=0.25, help="seconds above which an input is grown to test its growth")
    ap.add_argument("--limit", type=float, default=2.0, help="report an input whose time grows this many times faster than it")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rnd = random.Random(args.seed)
    failed = False
    with tempfile.TemporaryDirectory() as tmp:
        bundle = Path(tmp) / "seed.json"
        bundle.write_bytes(_files("bundles/realvllm-healthy.json.gz")[0])
        for name, target in targets(bundle).items():
            if args.only and name not in args.only:
                continue
            runs, findings = campaign(target, args.seconds, rnd, args.out, args.slow, args.limit)
            print(f"{name:8} {runs:6} inputs from {len(target.seeds)} seeds: {len(findings)} finding(s)")
            for line in findings:
                print(f"  {line}")
            failed = failed or bool(findings)
    if failed:
        print(f"inputs saved under {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
