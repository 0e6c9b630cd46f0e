"""The values every part of the settings shares: the defaults (read from the dataclasses that use
them, quoted by the help text through ``shown``), and the checks a flag's value passes.

Every default lives on a dataclass, once: the probe plan's on ``CollectConfig``
(``doctor.probes.plan``; its route and load shape are ``ProbeShape``'s, which an older bundle
loads with), the budgets on ``Budgets`` and ``--fail-on`` on ``AnalyzeOptions``. Resolution
reads them from ``PLAN``, ``BUDGETS``, ``ANALYSIS`` and ``PRACTICAL`` (what a comparison calls a
regression, ``doctor.model.Practical``), and the CLI's help text quotes them with
``shown``, so a default changed there changes the behaviour and the help together.

Values are checked while they are resolved, before anything is sent: a bad URL, a zero
``--rate`` or a typo in ``--fail-on`` is a ``UsageError`` naming the flag or config key.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from doctor.checking.runner import AnalyzeOptions
from doctor.foundation.console import warn
from doctor.foundation.errors import UsageError
from doctor.foundation.redact import Redactor
from doctor.foundation.this_host import host_key
from doctor.model import Budgets, Practical
from doctor.probes.http import credential_header
from doctor.probes.plan import CollectConfig
from doctor.settings.config_file import FileConfig

#: The flags of one command as typer hands them over, by option name (``--max-tokens`` is
#: ``max_tokens``); read by name only inside ``doctor.settings``.
Flags = Mapping[str, Any]

#: The defaults every flag falls back to, read from the dataclasses that use them.
PLAN = CollectConfig()
BUDGETS = Budgets()
ANALYSIS = AnalyzeOptions()
PRACTICAL = Practical()

#: The environment variable the API key is read from unless ``--api-key-env`` names another.
API_KEY_ENV = "OPENAI_API_KEY"


def shown(value: Any) -> str:
    """A default as help text quotes it: ``30.0`` -> ``30``, ``0.05`` -> ``0.05``."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def shown_duration(seconds: float) -> str:
    """A window as ``--since`` takes it: ``900.0`` -> ``15m``, ``7200.0`` -> ``2h``."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}"


def split(values: list[str] | None) -> list[str]:
    return [v.strip() for item in values or [] for v in item.split(",") if v.strip()]


#: The longest ``--since``: a quarter of history is more than Prometheus keeps by default (15 days);
#: a longer window only makes a query no server answers in time (or a start before the epoch).
MAX_SINCE_S = 90 * 86400.0
#: The longest ``--every``: a round less often than daily is a job for cron, not a watcher that
#: holds a port and a process for it; beyond it, ``1e300`` overflowed the wait.
MAX_EVERY_S = 86400.0


def since(value: Any) -> float:
    """``--since`` (or ``since`` of the config file) in seconds; the plan's default when unset."""
    return PLAN.since_s if not value else seconds(str(value), "--since", MAX_SINCE_S)


def seconds(text: str, flag: str, maximum: float) -> float:
    """``15m`` / ``2h`` / ``900`` -> seconds; a window or period must be finite, positive and at
    most ``maximum``."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    try:
        value = float(text[:-1]) * units[text[-1]] if text[-1:] in units else float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0 or value > maximum:
        raise UsageError(f"{flag} expects a positive duration of at most {shown_duration(maximum)} like 15m, 2h or 900, "
                         f"got {text!r}")
    return value


def bounded(value: Any, where: str, *, minimum: float, inclusive: bool = False, maximum: float | None = None) -> Any:
    """``value`` when finite, above ``minimum`` (or equal to it, when ``inclusive``) and, when
    given, at most ``maximum``.

    Without this, ``--ttft-budget -1`` yields a "healthy within -1.00 s" verdict, ``--rate 0``
    or ``--deadline inf`` a probe that never ends, and ``--requests 99999999999`` a run that
    eats the machine; ``where`` names the flag or config key.
    """
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an integer too large for a float is not a sane count either
        finite = False
    if not finite or value < minimum or (value == minimum and not inclusive) or (maximum is not None and value > maximum):
        bound = f">= {minimum:g}" if inclusive else f"> {minimum:g}"
        if maximum is not None:
            bound += f" and <= {maximum:g}"
        raise UsageError(f"{where} must be a finite number {bound}, got {value!r}")
    return value


#: The budget, in seconds, from which a number cannot be meant in seconds (``plausible``): a CPU engine
#: or an offline batch may mean a first token after a minute or a token every two seconds, but no
#: one means two minutes to a first token or five seconds a token; 500 and 50 are milliseconds.
#: Said in the flags' help.
REFUSED_BUDGET_S = {"ttft": 120.0, "tpot": 10.0}


def plausible(seconds: float, where: str, name: str) -> float:
    """``seconds`` unless it is ``REFUSED_BUDGET_S`` or more: then it is milliseconds typed as seconds
    (``--ttft-budget 500 --tpot-budget 50`` read HEALTHY against 500 s and 50 s), refused naming both."""
    if seconds >= REFUSED_BUDGET_S[name]:
        raise UsageError(f"{where} is in seconds: {seconds:g} s is not a {name.upper()} budget anyone means "
                         f"(budgets of {REFUSED_BUDGET_S[name]:g} s or more are refused); for {seconds:g} ms "
                         f"give {seconds / 1000:g}")
    return seconds


def probe_number(opts: Flags, cfg: FileConfig, key: str, default: Any, *, minimum: float, inclusive: bool = False,
                  maximum: float | None = None) -> Any:
    """A numeric probe setting: the flag, else ``[probe]`` of the config file, else ``default``.

    ``is not None`` rather than ``or``, so that an explicit 0 is checked, not replaced.
    """
    if opts.get(key) is not None:
        return bounded(opts[key], "--" + key.replace("_", "-"), minimum=minimum, inclusive=inclusive, maximum=maximum)
    if cfg.probe.get(key) is not None:
        return bounded(cfg.probe[key], f"[probe] {key} in {cfg.path}", minimum=minimum, inclusive=inclusive, maximum=maximum)
    return default


def checked_url(value: str | None, flag: str) -> str | None:
    """``value`` if httpx can send to it: http(s), a host, a port in 1-65535.

    Checked while parsing flags so that ``http://[::1`` or port 99999 is a usage error naming
    the flag, not a traceback or an obscure probe failure. Credentials in it stay redacted.
    """
    if value is None:
        return None
    shown = Redactor().text(value)
    try:
        url = httpx.URL(value)
    except httpx.InvalidURL as exc:
        raise UsageError(f"{flag} {shown!r} is not a valid URL: {exc}") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise UsageError(f"{flag} expects an http:// or https:// URL with a host, got {shown!r}")
    if url.port is not None and not 1 <= url.port <= 65535:
        raise UsageError(f"{flag} {shown!r}: the port must be between 1 and 65535")
    return value


def same_place(a: str, b: str) -> bool:
    """Whether two checked URLs reach the same server path: scheme, host (any case; every spelling of
    this machine is one host, ``doctor.foundation.this_host``), port (the scheme's default when left
    out) and path without its trailing slash."""
    defaults = {"http": 80, "https": 443}

    def key(url: httpx.URL) -> tuple[str, str, int | None, str]:
        return url.scheme, host_key(url.host), url.port or defaults.get(url.scheme), url.path.rstrip("/")

    return key(httpx.URL(a)) == key(httpx.URL(b))


def api_key(env: str, path: str | Path | None) -> str | None:
    """The key in the file ``path`` when given, else in the environment variable ``env``."""
    if path:
        try:
            return Path(path).read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise UsageError(f"cannot read --api-key-file {path}: {exc.strerror}") from None
    return os.environ.get(env) or None


ENV_VALUE = "@env:"


def headers(values: list[str] | None, flag: str = "--header") -> dict[str, str]:
    """``--header 'Name: value'`` (or ``flag``'s); ``'Name: @env:VAR'`` takes the value from the environment.

    A credential typed on the command line is visible to every user in ``ps`` and stays in shell
    history; the output is redacted either way, but only ``@env:`` keeps it off the command line,
    so a literal credential gets a warning that says how.
    """
    out: dict[str, str] = {}
    for item in values or []:
        name, sep, value = item.partition(":")
        name, value = name.strip(), value.strip()
        if not sep or not name:
            raise UsageError(f"{flag} expects 'Name: value', got a value without a name")
        if value.startswith(ENV_VALUE):
            var = value[len(ENV_VALUE):]
            if not os.environ.get(var):
                raise UsageError(f"{flag} {name}: the environment variable {var!r} is not set or empty")
            value = os.environ[var]
        elif value and credential_header(name):
            warn(f"the {name} header's value is on the command line, visible in "
                 f"ps and shell history; pass it as '{name}: {ENV_VALUE}VAR' instead")
        out[name] = value
    return out


def pick(opts: Flags, file_section: Mapping[str, Any], key: str, default: Any) -> Any:
    """Flag, else config file, else default."""
    value = opts.get(key)
    if value is not None:
        return value
    return file_section.get(key, default)


