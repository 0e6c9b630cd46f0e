"""Redaction, applied to the whole evidence bundle before it is stored, printed or rendered.

One pass walks every string of the typed bundle (sos ``postproc`` applied at the write
boundary), so a secret cannot slip through a field that a rule forgot. It removes the literal
values the user gave us (API key, credential ``--header`` values), then pattern rules: bearer
tokens, whole credential-header values, ``sk-``/``hf_`` style keys, ``api_key`` / ``--api-key``
values in logged engine args, the user part of URLs and credential query parameters. Mappings
(headers, the request payload, engine config) lose the string values of credential-named keys
outright. How many values each rule removed is recorded in ``Bundle.redactions``. A rule runs
only on text holding one of its literal triggers (``Rule``), so the long /metrics scrapes of a
bundle, which hold none, are not scanned nine times.

Every rule names the span it masks; overlapping spans are merged and masked once, counted under
one rule, and text that is already ``[REDACTED]`` is left alone. That keeps two rules that both
see ``x-api-key: zzz`` from producing ``[[REDACTED]]``, and a second pass from counting again.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any, NamedTuple

from doctor.foundation.wire import clean

MASK = "[REDACTED]"

# Header names whose whole value is a credential, wherever ``Name: value`` / ``name=value`` is seen.
_CREDENTIAL_HEADER = r"(?:proxy-)?authorization|openai-api-key|x-api-key|api-key|set-cookie"


class Rule(NamedTuple):
    """A pattern rule: what it masks, and the literals without which it cannot match.

    The group named ``secret``, or the whole match when there is none, is masked. ``triggers`` are
    substrings one of which occurs in any text ``pattern`` matches, read off the pattern (each of its
    alternatives must contain one), lowercase and looked for in the folded text (``_fold``) when the
    pattern ignores case: a rule none of whose triggers occurs is not run. A trigger the pattern
    does not need would leak a secret, so each is derived from the pattern beside it, and
    tests/collection/test_redact_triggers.py checks the gate against running every rule.

    Why: a ``diagnose`` of a real vLLM keeps ~30-90 ``/metrics`` scrapes of ~50 KB, on which each
    scan costs 0.1-5 ms (all nine ~15 ms, 0.2-0.65 s of CPU a bundle); the scrapes hold none of the
    triggers, looked for in ~0.7 ms a scrape (docs/benchmarks.md, ``bench/redact_bundle.py``).
    """

    name: str
    pattern: re.Pattern[str]
    triggers: tuple[str, ...]


RULES: tuple[Rule, ...] = (
    # Ends at a quote, ``,`` ``;`` ``}`` or the end of the line: ``Basic dXNl...`` and ``Token abc``
    # are one value, and the ``,`` ``;`` ``}`` bounds keep the rest of a dict repr or cookie list.
    # Triggers: every name of ``_CREDENTIAL_HEADER`` holds one of the three.
    Rule("header-credential", re.compile(
        r"""(?i)\b(?:""" + _CREDENTIAL_HEADER + r""")['"]?\s*[:=]\s*['"]?(?P<secret>[^\s'",;}](?:[^\r\n'",;}]*[^\s'",;}])?)"""
    ), ("authorization", "api-key", "set-cookie")),
    # Every ``name=value`` pair of a Cookie header is a credential, so it runs to the end of the value
    # (a Set-Cookie's ``; Path=/`` attributes are not, so that header stops at ``;`` above).
    Rule("cookie", re.compile(r"""(?i)(?<!set-)\bcookie['"]?\s*[:=]\s*['"]?(?P<secret>[^\s'"](?:[^\r\n'"]*[^\s'"])?)"""),
         ("cookie",)),
    Rule("bearer-token", re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9._~+/=-]{4,})"), ("bearer",)),
    # vLLM accepts several keys (``--api-key a b``): its args line then holds a list, masked whole.
    Rule("api-key-list", re.compile(r"""(?i)(?:--)?api[_-]key['"]?\s*[:=]\s*(?P<secret>[\[(]\s*['"][^\])\r\n]*[\])])"""),
         ("api_key", "api-key")),
    Rule("api-key-arg", re.compile(
        r"""(?i)(?:--)?api[_-]key['"]?\s*[:=]\s*['"]?(?!(?:None|null|true|false)\b)(?P<secret>[^'",\s)\]}\[(][^'",\s)\]}]*)"""
    ), ("api_key", "api-key")),
    # ``--api-key`` takes one or more keys: everything up to the next flag is masked.
    Rule("api-key-flag", re.compile(r"(?i)--api-key\s+(?!-)(?P<secret>\S+(?:[ \t]+(?!-)[^\s'\"]+)*)"), ("--api-key",)),
    # ``scheme://user:password@`` and ``scheme://token@``: the whole user-info part. Anchored on the
    # ``://`` (after one scheme character), not on the scheme's start: ``\b[a-z][a-z0-9+.-]*://``
    # ran to the end of ``a.a.a...`` from every word start, quadratic on every kept log line.
    Rule("url-credentials", re.compile(r"""(?i)(?<=[a-z0-9+.-])://(?P<secret>[^/?#\s@'"<>]+)@"""), ("://",)),
    # Triggers: each name alternative and the ``=`` after it (``api[_-]?key`` ends in ``key``).
    Rule("url-query-credential", re.compile(
        r"""(?i)[?&;](?:[a-z0-9_.-]*(?:token|api[_-]?key|secret|password|passwd)|key|sig|signature|auth)=(?P<secret>[^&#\s'"<>]+)"""
    ), ("token=", "key=", "secret=", "password=", "passwd=", "sig=", "signature=", "auth=")),
    # Case-sensitive, so are its triggers.
    Rule("key-like", re.compile(r"\b(?:sk-[A-Za-z0-9_-]{16,}|hf_[A-Za-z0-9]{20,}|ghp_[A-Za-z0-9]{20,})"),
         ("sk-", "hf_", "ghp_")),
)

# The letters that re's IGNORECASE equates with an ASCII letter, beyond A-Z (re's docs, ``[a-z]``
# with IGNORECASE): U+0130 and U+0131 (dotted capital and dotless small i), U+017F (long s) and
# U+212A (Kelvin sign). ``str.lower`` keeps U+0131 and U+017F and makes U+0130 two characters, so
# each is mapped to its ASCII letter first, or ``author\u0131zation: ...`` would hide from the gate.
_ASCII_FOLD = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


def _fold(value: str) -> str:
    """``value`` lowercased so that a case-insensitive trigger is found wherever re would match it."""
    return value.lower() if value.isascii() else value.translate(_ASCII_FOLD).lower()


# Each rule with whether its triggers are looked for in the folded text, read once: testing the
# ``RegexFlag`` per string took ~0.1 s of CPU on a recorded bundle of 10,000 short strings.
_GATES = tuple((rule, bool(rule.pattern.flags & re.IGNORECASE)) for rule in RULES)


def _candidates(value: str) -> list[Rule]:
    """The rules that can match ``value``: those with a trigger in it (one fold of the text)."""
    folded = _fold(value)
    return [rule for rule, fold in _GATES if any(t in (folded if fold else value) for t in rule.triggers)]


# Mapping keys whose string values are credentials: ``api_key``, ``X-Api-Key``, ``accessToken``,
# ``client_secret``, ``Set-Cookie``... Matched on whole words of the key, so ``tokenizer`` and
# ``max_tokens`` (configuration, not secrets) are kept.
_SENSITIVE_KEY = re.compile(
    r"(?:^|[^a-z])(?:api[_-]?key|[a-z]*token|[a-z]*secret|[a-z]*password|passwd|authorization|[a-z]*cookie)(?:$|[^a-z])"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def sensitive_key(name: str) -> bool:
    """Whether a mapping key names a credential, so its string value is masked whatever it holds."""
    return bool(_SENSITIVE_KEY.search(_CAMEL.sub("_", name).lower()))


class Redactor:
    """Masks secrets in strings and data trees, counting what each rule removed in ``counts``."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)
        self.counts: Counter[str] = Counter()

    def _spans(self, value: str) -> list[tuple[int, int, str]]:
        """Every span some rule wants masked, as (start, end, rule), user secrets first."""
        spans = []
        for secret in self.secrets:
            start = value.find(secret)
            while start != -1:
                spans.append((start, start + len(secret), "user-secret"))
                start = value.find(secret, start + 1)
        for name, pattern, _ in _candidates(value):
            group = "secret" if "secret" in pattern.groupindex else 0
            spans += [(*m.span(group), name) for m in pattern.finditer(value)]
        return spans

    def text(self, value: str) -> str:
        """``value`` with every secret replaced by ``[REDACTED]``; each masked span counts once."""
        value = clean(value)  # the one pass over every string of a bundle: a surrogate cannot reach a writer
        spans = self._spans(value)
        if not spans:
            return value
        # Text already masked is not a secret: a span that holds nothing else is dropped, and a
        # span reaching into a mask takes the whole of it, so no ``[[REDACTED]]`` fragments appear.
        masked = [m.span() for m in re.finditer(re.escape(MASK), value)]
        mask_ends = [e for _, e in masked]  # masks do not overlap: ends are sorted like starts
        kept = []
        for start, end, rule in spans:
            first = bisect.bisect_right(mask_ends, start)
            last = bisect.bisect_left(masked, (end, -1), lo=first)
            inside = masked[first:last]
            if inside:
                if not _visible_alnum(value, start, end, inside):
                    continue
                start, end = min(start, inside[0][0]), max(end, inside[-1][1])
            kept.append((start, end, rule))
        # Merge overlapping spans (stable sort: the earliest start wins the count, then rule order).
        merged: list[list[Any]] = []
        for start, end, rule in sorted(kept, key=lambda span: span[0]):
            if merged and start < merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], end)
            else:
                merged.append([start, end, rule])
        out, last = [], 0
        for start, end, rule in merged:
            out += [value[last:start], MASK]
            last = end
            self.counts[rule] += 1
        out.append(value[last:])
        return "".join(out)

    def walk(self, obj: Any) -> Any:
        """Redact a dataclass tree in place (and return plain containers rebuilt).

        A string under a credential-named key (``api_key``, ``Authorization``, ``token``...) is
        masked whole, at any depth: a ``--payload`` body or an echoed header map can carry a
        secret no text pattern recognises.
        """
        if isinstance(obj, str):
            return self.text(obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            for f in dataclasses.fields(obj):
                setattr(obj, f.name, self.walk(getattr(obj, f.name)))
            return obj
        if isinstance(obj, dict):
            return {clean(k) if isinstance(k, str) else k: self._value(k, v) for k, v in obj.items()}
        if isinstance(obj, list):
            return [self.walk(v) for v in obj]
        return obj

    def _value(self, key: Any, value: Any) -> Any:
        if isinstance(key, str) and sensitive_key(key):
            if isinstance(value, str) and value != MASK:
                self.counts["sensitive-key"] += 1
                return MASK
            if isinstance(value, list) and any(isinstance(v, str) and v != MASK for v in value):
                self.counts["sensitive-key"] += 1  # several keys (vLLM accepts a list) are one value
                return [MASK if isinstance(v, str) else self.walk(v) for v in value]
        return self.walk(value)


def _visible_alnum(value: str, start: int, end: int, masks: list[tuple[int, int]]) -> bool:
    """Whether ``value[start:end]`` holds a letter or digit outside ``masks`` (sorted, each
    overlapping the span): one pass over the span, so a line of many masks stays linear."""
    pos = start
    for s, e in [*masks, (end, end)]:
        if any(c.isalnum() for c in value[pos:min(s, end)]):
            return True
        pos = max(pos, e)
    return False


def redact_bundle(bundle: Any, secrets: Iterable[str] = ()) -> Any:
    """Redact a ``Bundle`` in place and add the per-rule counts to ``bundle.redactions``."""
    redactor = Redactor(secrets)
    redactor.walk(bundle)
    for rule, n in redactor.counts.items():
        bundle.redactions[rule] = bundle.redactions.get(rule, 0) + n
    return bundle
