"""Redaction, applied to the whole evidence bundle before it is stored, printed or rendered.

One pass walks every string of the typed bundle (sos ``postproc`` applied at the write
boundary), so a secret cannot slip through a field that a rule forgot. It removes the literal
values the user gave us (API key, ``--header`` values), then pattern rules: bearer tokens,
``sk-``/``hf_`` style keys, ``api_key`` / ``--api-key`` values in logged engine args, and
``user:password@`` in URLs. Header maps lose the values of credential headers outright.
How many values each rule removed is recorded in ``Bundle.redactions``.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

MASK = "[REDACTED]"

SENSITIVE_HEADERS = frozenset(
    {"authorization", "proxy-authorization", "api-key", "x-api-key", "cookie", "set-cookie", "openai-api-key"}
)

# (rule name, pattern, replacement); group 1, when present, is kept.
RULES: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("bearer-token", re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]{4,}"), r"\1" + MASK),
    ("header-credential", re.compile(r"(?i)((?:authorization|api-key|x-api-key)\s*[:=]\s*)(?!\[REDACTED\])[^\s,;'\"}]+"), r"\1" + MASK),
    ("api-key-arg", re.compile(r"""(?i)((?:--)?api[_-]key['"]?\s*[:=]\s*(?:[\[(]\s*)?['"]?)(?!\[REDACTED\])(?!None\b)[^'",\s)\]]+"""), r"\1" + MASK),
    ("api-key-flag", re.compile(r"(?i)(--api-key\s+)(?!\[REDACTED\])(?!-)\S+"), r"\1" + MASK),
    ("url-credentials", re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@"), r"\1" + MASK + "@"),
    ("key-like", re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|ghp_[A-Za-z0-9]{20,})"), MASK),
)


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        # Longest first so a secret that contains another is removed whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)
        self.counts: Counter[str] = Counter()

    def text(self, value: str) -> str:
        for secret in self.secrets:
            if secret in value:
                self.counts["user-secret"] += value.count(secret)
                value = value.replace(secret, MASK)
        for name, pattern, repl in RULES:
            value, n = pattern.subn(repl, value)
            if n:
                self.counts[name] += n
        return value

    def headers(self, headers: dict[str, str]) -> dict[str, str]:
        out = {}
        for k, v in headers.items():
            if k.lower() in SENSITIVE_HEADERS and v != MASK:
                self.counts["sensitive-header"] += 1
                out[k] = MASK
            else:
                out[k] = self.text(v)
        return out

    def walk(self, obj: Any) -> Any:
        """Redact a dataclass tree in place (and return plain containers rebuilt)."""
        if isinstance(obj, str):
            return self.text(obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                setattr(obj, f.name, self.walk(getattr(obj, f.name)))
            return obj
        if isinstance(obj, dict):
            if obj and all(isinstance(k, str) and isinstance(v, str) for k, v in obj.items()):
                obj = self.headers(obj)
            return {k: self.walk(v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.walk(v) for v in obj]
        return obj


def redact_bundle(bundle: Any, secrets: Iterable[str] = ()) -> Any:
    """Redact a ``Bundle`` in place and add the per-rule counts to ``bundle.redactions``."""
    redactor = Redactor(secrets)
    redactor.walk(bundle)
    for rule, n in redactor.counts.items():
        bundle.redactions[rule] = bundle.redactions.get(rule, 0) + n
    return bundle
