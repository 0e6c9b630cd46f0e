"""Configuration: the TOML file (``llm-doctor.toml`` or ``--config``) merged under the flags.

The file can hold targets, probe shape, budgets (also per region), check thresholds and
run-record fields::

    [targets]
    engine = "http://10.0.0.5:8000"
    gateway = "https://llm.example.com"
    log = "/var/log/vllm.log"

    [probe]
    route = "chat"
    concurrency = 4

    [budgets]
    ttft = 0.5          # seconds
    tpot = 0.05
    [budgets.regions.eu-west-1]
    ttft = 0.8

    [run]
    provider = "aws"
    region = "eu-west-1"

    [checks.LD101]      # or the check's name
    queue_share = 0.6

    [analysis]
    fail_on = "warning"
    ignore = ["LD9"]

API keys never live in this file: only the name of the environment variable or a key file.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from doctor.errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_CONFIG = "llm-doctor.toml"


@dataclass
class FileConfig:
    targets: dict[str, Any] = field(default_factory=dict)
    probe: dict[str, Any] = field(default_factory=dict)
    budgets: dict[str, Any] = field(default_factory=dict)
    run: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    analysis: dict[str, Any] = field(default_factory=dict)
    path: str | None = None

    def budget(self, name: str, region: str | None) -> float | None:
        """A budget (``ttft`` / ``tpot``, seconds), the region's value first."""
        regional = self.budgets.get("regions", {}).get(region or "", {})
        value = regional.get(name, self.budgets.get(name))
        return float(value) if value is not None else None


_SECTIONS = {"targets", "probe", "budgets", "run", "checks", "analysis"}
_FORBIDDEN = {"api_key", "api-key", "apikey", "token", "password"}


def load_config(path: Path | None) -> FileConfig:
    """Load ``path``, or ``llm-doctor.toml`` in the working directory when it exists."""
    if path is None:
        default = Path(DEFAULT_CONFIG)
        if not default.is_file():
            return FileConfig()
        path = default
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read config {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config {path} is not valid TOML: {exc}") from None
    unknown = set(data) - _SECTIONS
    if unknown:
        raise UsageError(f"config {path}: unknown section(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(_SECTIONS))}")
    for section in ("targets", "probe", "run"):
        bad = _FORBIDDEN & {k.lower() for k in data.get(section, {})}
        if bad:
            raise UsageError(
                f"config {path}: secrets do not belong in the config file ({', '.join(sorted(bad))}); "
                "use api_key_env or api_key_file"
            )
    return FileConfig(**{k: data.get(k, {}) for k in _SECTIONS}, path=str(path))


def parse_set(values: list[str]) -> dict[str, dict[str, Any]]:
    """``--set LD101.queue_share=0.6`` -> ``{"LD101": {"queue_share": "0.6"}}`` (typed later)."""
    out: dict[str, dict[str, Any]] = {}
    for item in values:
        key, sep, value = item.partition("=")
        check, dot, option = key.partition(".")
        if not sep or not dot or not check or not option:
            raise UsageError(f"--set expects CHECK.OPTION=VALUE, got {item!r}")
        out.setdefault(check.strip(), {})[option.strip()] = value.strip()
    return out
