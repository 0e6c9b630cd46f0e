"""The redactor's trigger gate skips only rules that cannot match: same output and counts as running every rule.

A rule runs on a text only when one of its literal triggers occurs in it (``doctor/foundation/redact.py``,
``Rule.triggers``). A trigger the pattern does not need would leak a secret, so the gate is checked
against the reference it replaces: every rule scanned on every text. Texts are built from the pieces
of every rule's matches (names, separators, values, masks, scrape noise), each in some case, including
the four non-ASCII letters that re's IGNORECASE equates with ASCII ones.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.bundle import load_path
from doctor.foundation import redact
from doctor.foundation.redact import MASK, RULES, Redactor

ROOT = Path(__file__).resolve().parents[2]

#: Whole matches, at least one per rule (checked below), drawn whole into the texts and in pieces.
MATCHES = [
    "Authorization: Basic dXNlcjpwYXNz", "Proxy-Authorization: Digest username=bob, response=0123abcd",
    '{"Authorization": "Basic dXNl"}', "x-api-key: zzzzzz", "openai-api-key=k3y", "Set-Cookie: sid=abc; Path=/",
    "Cookie: session=abc123def; theme=dark", "{'cookie': 'a=b'}", "Bearer abcdef123456", "x: bearer  a.b~c+d/e=",
    "{'api_key': ['alpha123', 'beta4567']}", "API-KEY=('k1', 'k2')", "api_key: abc123def", "--api-key=abc123def",
    "--api-key key1aaaa key2bbbb --port 8000", "https://user:pa55word@api.example.com/v1", "git+ssh://tok3n@h",
    "https://h/v1?model=m&access_token=abc123def&x=1", "?sig=abc123def%3D", ";auth=x", "&signature=s", "?passwd=p",
    "?client_secret=s", "?apikey=k", "?api-key=k", "?key=k", "?password=p", "sk-abcdefghijklmnopqrstuv",
    "hf_ABCDEFGHIJKLMNOPQRSTUV", "ghp_abcdefghijklmnopqrstuvwxyz",
]
NAMES = [
    "Authorization", "Proxy-Authorization", "openai-api-key", "X-Api-Key", "api-key", "Set-Cookie", "Cookie",
    "Bearer", "api_key", "--api-key", "--", "https", "://", "token", "access_token", "apikey", "api-key", "secret",
    "client_secret", "password", "passwd", "key", "sig", "signature", "auth", "sk-", "hf_", "ghp_", "set-",
]
SEPARATORS = [": ", ":", "=", " ", "  ", "'", '"', "\n", "\r\n", "\t", ",", ";", "}", "{", "[", "]", "(", ")", "@",
              "/", "?", "&", "#", "<", ">", "-", "_", "."]
VALUES = [
    "abc123def", "dXNlcjpwYXNz", "Basic dXNl", "ABCDEFGHIJKLMNOPQRSTUVWX", "abcdefghij0123456789xyz", "None", "null",
    "true", MASK, "u:p4ss", "h.example.com", "tok3n@h.example.com", "x", "1", "['k1aaaa', 'k2bbbb']", "session=abc; theme=dark", "-x",
]
NOISE = ['vllm:num_requests_waiting{model_name="m"} 0.0', "# HELP vllm:prompt_tokens_total Number of prefill tokens.",
         "max_tokens=64", "tokenizer=meta-llama/Llama-3", "http://127.0.0.1:8000/v1/models?model=m", "key cache"]
FRAGMENTS = MATCHES + NAMES + SEPARATORS + VALUES + NOISE

#: What re's IGNORECASE takes for ``i``, ``s`` and ``k`` besides ASCII (U+0130 and U+0131, U+017F, U+212A).
_LOOKALIKES = str.maketrans({"i": "\u0131", "I": "\u0130", "s": "\u017f", "k": "\u212a", "K": "\u212a"})
#: Each piece as it is, in another case, or with its spaces another kind of white space.
VARIANTS = [str, str.upper, str.lower, str.swapcase, str.title, lambda s: s.translate(_LOOKALIKES),
            lambda s: s.replace(" ", "\t"), lambda s: s.replace(" ", "\n")]


def varied(pieces: list[str]) -> st.SearchStrategy[str]:
    """One of ``pieces`` in one of the ``VARIANTS``."""
    return st.builds(lambda text, variant: variant(text), st.sampled_from(pieces), st.sampled_from(VARIANTS))


#: ``name``, a separator or two, ``value``: the shape of most matches, which loose fragments rarely form.
clause = st.builds(lambda *parts: "".join(parts), st.sampled_from(["", "?", "&", ";", "--", " "]), varied(NAMES),
                   st.lists(st.sampled_from(SEPARATORS), max_size=2).map("".join), varied(VALUES))
texts = st.lists(st.one_of(varied(MATCHES), clause, varied(FRAGMENTS), st.text(max_size=3)), max_size=12).map("".join)


def every_rule_run(redactor: Redactor, text: str) -> tuple[str, dict[str, int]]:
    """The reference: the redactor with its gate replaced by every rule, as before the triggers."""
    with mock.patch.object(redact, "_candidates", lambda value: list(RULES)):
        return redactor.text(text), dict(redactor.counts)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(texts, st.lists(st.sampled_from(VALUES + NAMES), max_size=2))
def test_the_gate_changes_no_output_and_no_count(text, secrets):
    for rule in RULES:
        if rule.pattern.search(text):
            assert rule in redact._candidates(text), (rule.name, text)
    gated = Redactor(secrets)
    assert (gated.text(text), dict(gated.counts)) == every_rule_run(Redactor(secrets), text)


def test_the_texts_reach_every_rule():
    """The property above is only as good as its texts: every rule matches one of the whole matches drawn."""
    assert {rule.name for rule in RULES for text in MATCHES if rule.pattern.search(text)} == {r.name for r in RULES}


def test_every_character_re_equates_with_a_trigger_folds_to_it():
    """Exhaustive over Unicode: a character that IGNORECASE matches in place of one of a trigger's
    is that character once folded, so no spelling of a trigger hides from the gate."""
    triggers = {t for rule in RULES if rule.pattern.flags & re.IGNORECASE for t in rule.triggers}
    assert all(t == redact._fold(t) for t in triggers)
    every_char = "".join(chr(c) for c in range(sys.maxunicode + 1) if not 0xD800 <= c <= 0xDFFF)
    for ch in set("".join(triggers)):
        same = {m.group() for m in re.finditer(re.escape(ch), every_char, re.IGNORECASE)}
        assert {redact._fold(c) for c in same} == {ch}, (ch, same)


@pytest.mark.parametrize("text, secret", [
    ("Author\u0131zation: Basic abc123def", "abc123def"),
    ("AUTHOR\u0130ZATION: Basic abc123def", "abc123def"),
    ("\u017fet-cookie: sid=abc123def", "abc123def"),
    ("x-api-\u212aey: abc123def", "abc123def"),
    ("https://h/v1?tO\u212aEN=abc123def", "abc123def"),
])
def test_lookalike_letters_do_not_hide_a_credential(text, secret):
    out = Redactor().text(text)
    assert secret not in out and MASK in out


def test_a_recorded_vllm_scrape_runs_no_rule():
    """What the gate is for: the ~50 KB /metrics scrapes of a diagnosis hold no trigger, so no scan."""
    bundle = load_path(ROOT / "fixtures/bundles/realvllm-users-queueing.json.gz")
    scrapes = [s.text for s in bundle.metrics.scrapes if s.text]
    assert len(scrapes) > 10 and all(redact._candidates(text) == [] for text in scrapes)
