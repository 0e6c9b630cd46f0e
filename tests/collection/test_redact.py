"""The redactor masks whole credentials, in text and under credential-named keys, and counts each once."""

from __future__ import annotations

import pytest

from doctor.evidence import Bundle
from doctor.foundation.redact import MASK, Redactor, redact_bundle
from doctor.probes.http import HttpOptions
from tests.support import bundles


def redact(text: str, secrets: tuple[str, ...] = ()) -> tuple[str, dict[str, int]]:
    redactor = Redactor(secrets)
    return redactor.text(text), dict(redactor.counts)


@pytest.mark.parametrize(
    "text, secret",
    [
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("authorization: Token abc123def", "abc123def"),
        ("Proxy-Authorization: Digest username=bob, response=0123abcd", "username=bob"),
        ('{"Authorization": "Basic dXNlcjpwYXNz"}', "dXNlcjpwYXNz"),
        ("{'authorization': 'Token abc123def', 'x': 1}", "abc123def"),
        ('vllm:x{authorization="Basic dXNlcjpwYXNz"} 1', "dXNlcjpwYXNz"),
        ("Cookie: session=abc123def; theme=dark", "abc123def"),
        ("GET https://tok3nvalue@api.example.com/v1", "tok3nvalue"),
        ("GET https://user:pa55word@api.example.com/v1", "pa55word"),
        ("https://h/v1?token=abc123def", "abc123def"),
        ("https://h/v1?model=m&access_token=abc123def&x=1", "abc123def"),
        ("https://h/v1?api_key=abc123def", "abc123def"),
        ("https://h/v1?key=abc123def", "abc123def"),
        ("https://h/blob?sv=1&sig=abc123def%3D", "abc123def"),
        ("https://h/v1?signature=abc123def", "abc123def"),
        ("https://h/login?user=u&password=abc123def", "abc123def"),
    ],
)
def test_the_whole_credential_is_masked(text, secret):
    out, counts = redact(text)
    assert secret not in out and MASK in out
    assert sum(counts.values()) == out.count(MASK)


def test_basic_credentials_leave_no_part_of_the_value():
    assert redact("Authorization: Basic dXNlcjpwYXNz")[0] == f"Authorization: {MASK}"
    assert redact("Authorization: Bearer abcdef123456\nnext line")[0] == f"Authorization: {MASK}\nnext line"


def test_bearer_outside_a_header_is_still_masked():
    assert redact("curl -H 'x: Bearer abcdef123456'")[0] == f"curl -H 'x: Bearer {MASK}'"


def test_only_the_credential_is_masked_in_a_url():
    out, _ = redact("https://tok3nvalue@api.example.com/v1?model=m&token=abc123def#frag")
    assert out == f"https://{MASK}@api.example.com/v1?model=m&token={MASK}#frag"


@pytest.mark.parametrize(
    "text",
    ["x-api-key: zzzzzz", "X-Api-Key=zzzzzz", "api-key: zzzzzz", "openai-api-key: zzzzzz", "--api-key zzzzzz"],
)
def test_overlapping_rules_mask_and_count_once(text):
    out, counts = redact(text)
    assert "zzzzzz" not in out and "[[" not in out and "]]" not in out
    assert out.count(MASK) == 1 and sum(counts.values()) == 1


def test_a_user_secret_inside_a_credential_counts_once():
    out, counts = redact("X-Echo-Authorization: Bearer sk-abcdefghijklmnopqrstuvwxyz", ("sk-abcdefghijklmnopqrstuvwxyz",))
    assert out == f"X-Echo-Authorization: {MASK}" and sum(counts.values()) == 1


def test_redacting_twice_changes_and_counts_nothing_more():
    text = "Authorization: Basic dXNl x-api-key: zz9999 https://a:b@h/?token=t0k3n {'api_key': ['k3y9']}"
    once, first = redact(text)
    twice, second = redact(once)
    assert twice == once and second == {} and sum(first.values()) == once.count(MASK)


def test_harmless_text_is_untouched():
    text = "max_tokens=64 tokenizer=meta-llama/Llama-3 http://127.0.0.1:8000/v1/models?model=m key cache"
    assert redact(text) == (text, {})


def test_payload_values_under_credential_keys_are_masked_at_any_depth():
    b = bundles.bundle(stream=bundles.stream([bundles.request("direct", 0, ttft=0.2, gaps=[0.03])]))
    b.stream.shape.payload = {
        "model": "m",
        "max_tokens": 64,
        "api_key": "abc123xyz",
        "metadata": {"Token": "t0k3nvalue", "clientSecret": "s3cr3tvalue", "list": [{"PASSWORD": "pw123456"}]},
        "extra_headers": {"Authorization": "Basic dXNl", "X-Session-Cookie": "c00kie"},
        "tokenizer": "meta-llama/Llama-3",
        "stop_token_ids": [1, 2],
    }
    redact_bundle(b)
    payload = b.stream.shape.payload
    assert payload["api_key"] == MASK and payload["metadata"]["Token"] == MASK
    assert payload["metadata"]["clientSecret"] == MASK and payload["metadata"]["list"][0]["PASSWORD"] == MASK
    assert payload["extra_headers"] == {"Authorization": MASK, "X-Session-Cookie": MASK}
    assert payload["tokenizer"] == "meta-llama/Llama-3" and payload["max_tokens"] == 64 and payload["stop_token_ids"] == [1, 2]
    assert b.redactions == {"sensitive-key": 6}


def test_counts_add_up_per_rule_in_the_bundle():
    b = Bundle()
    b.run.labels = {"note": "https://u:p4ssw0rd@h/ and Authorization: Basic dXNl"}
    b.redactions = {"url-credentials": 2}
    redact_bundle(b, ["p4ssw0rd"])
    assert b.run.labels["note"] == f"https://{MASK}@h/ and Authorization: {MASK}"
    assert b.redactions == {"url-credentials": 3, "header-credential": 1}


def test_only_credential_headers_are_literal_secrets():
    http = HttpOptions(
        api_key="sk-key",
        headers={"Accept": "text/event-stream", "X-Custom-Auth": "c1", "X-Api-Key": "c2", "Cookie": "c3",
                 "X-Session-Id": "c4", "X-Request-Signature": "c5", "X-Client-Credential": "c6", "X-Tenant": "acme"},
    )
    assert sorted(http.secrets()) == ["c1", "c2", "c3", "c4", "c5", "c6", "sk-key"]
    b = Bundle()
    b.run.labels = {"ctype": "text/event-stream", "tenant": "acme-corp"}
    redact_bundle(b, http.secrets())
    assert b.run.labels == {"ctype": "text/event-stream", "tenant": "acme-corp"} and b.redactions == {}


@pytest.mark.parametrize(
    "text, leaked",
    [
        ("non-default args: {'api_key': ['alpha123', 'beta4567'], 'port': 8000}", ["alpha123", "beta4567"]),
        ("command: vllm serve m --api-key key1aaaa key2bbbb --port 8000", ["key1aaaa", "key2bbbb"]),
        ("Cookie: session=abc123; csrftoken=def456", ["abc123", "def456"]),
    ],
)
def test_every_key_of_a_multi_valued_credential_is_masked(text, leaked):
    out = Redactor().text(text)
    assert not [secret for secret in leaked if secret in out], out


@pytest.mark.parametrize("text", ['{"api_key": null}', "{'api_key': None, 'x': 1}", "api_key: []",
                                  "Set-Cookie: [REDACTED]; Path=/"])
def test_values_that_are_not_secrets_are_left_intact(text):
    redactor = Redactor()
    assert redactor.text(text) == text
    assert not redactor.counts


def test_a_list_of_keys_under_a_credential_name_is_masked():
    redactor = Redactor()
    assert redactor.walk({"api_key": ["alpha123", "beta4567"], "n": 1}) == {"api_key": [MASK, MASK], "n": 1}
